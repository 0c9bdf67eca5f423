"""The JSON number texts a numeric schema allows, exactly (SPEC §5).

Bounds become digit automata: a canonical numeral (no leading zero) is compared with a
bound digit by digit (a longer numeral is larger; at equal length the first differing
digit decides), a fraction by the first differing digit of its padded expansion. Both
are regular, so ``minimum``/``maximum`` (inclusive or exclusive, integer or decimal) are
enforced exactly on plain texts (``-12``, ``0.25``, ``-0``, ``3.10``).

Exponent forms (``1e-05``, ``2.5E+20``): exactly all of them when no magnitude matters
(no bound, or bounds at 0). With a non-zero bound the set of exponent texts in range is
*not* regular (``0.0…01e+k ≥ 1`` compares a count of zeros with ``k``), so only the
normalised scientific form ``d[.ddd]e±k`` (one non-zero digit before the point — what
``json.dumps`` writes) and zero mantissas are accepted there, exactly; other exponent
forms (``12e3``, ``0.5e1``) are rejected: valid texts lost, never invalid ones accepted.

``multipleOf`` reads the digits modulo the divisor: exact for plain texts (a decimal
divisor ``a·10⁻ˢ`` allows at most ``s`` significant fraction digits); exponent forms are
rejected under ``multipleOf``. Divisors needing too many states raise
:class:`~tether.errors.CompileError` at ``…/multipleOf``.

Integers are ``-?(0|[1-9][0-9]*)``; integer-valued texts such as ``1.0`` or ``1e2`` are
not accepted as integers (rejected, never wrongly accepted).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import numpy as np

from tether.automata.boolean import EMPTY_LANGUAGE, intersect, is_empty
from tether.automata.regex_ast import (
    EMPTY,
    Alternate,
    Automaton,
    CharSet,
    Concat,
    Node,
    Repeat,
    literal,
)
from tether.errors import CompileError

MAX_MULTIPLE_STATES = 50_000  # states of a multipleOf automaton
MAX_ENUMERATED_MULTIPLES = 2_000

_DIGIT = CharSet(((48, 57),))
_NONZERO = CharSet(((49, 57),))
_MINUS = literal("-")
_FRACTION = Repeat(Concat((literal("."), Repeat(_DIGIT, 1, None))), 0, 1)
_E = CharSet(((69, 69), (101, 101)))
_EXPONENT = Concat((_E, Repeat(CharSet(((43, 43), (45, 45))), 0, 1), Repeat(_DIGIT, 1, None)))
_ZERO_FRACTION = Repeat(Concat((literal("."), Repeat(literal("0"), 1, None))), 0, 1)
_NUMERAL = Alternate((literal("0"), Concat((_NONZERO, Repeat(_DIGIT, 0, None)))))
_UNSIGNED = Concat((_NUMERAL, _FRACTION, Repeat(_EXPONENT, 0, 1)))
_ZERO = Concat((literal("0"), _ZERO_FRACTION, Repeat(_EXPONENT, 0, 1)))
_NONZERO_UNSIGNED = Alternate((
    Concat((_NONZERO, Repeat(_DIGIT, 0, None), _FRACTION, Repeat(_EXPONENT, 0, 1))),
    Concat((literal("0."), Repeat(_DIGIT, 0, None), _NONZERO, Repeat(_DIGIT, 0, None),
            Repeat(_EXPONENT, 0, 1)))))


def json_integer(*, minimum: int | None = None, maximum: int | None = None,
                 multiple_of: int | None = None, location: str = "") -> Node:
    """JSON integer texts with a value in ``[minimum, maximum]`` (either may be None) that
    are multiples of ``multiple_of``. ``-0`` is 0."""
    for name, value in (("minimum", minimum), ("maximum", maximum), ("multipleOf", multiple_of)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise CompileError(f"{name} must be an integer here, not {value!r}",
                               location=f"{location}/{name}")
    if multiple_of is not None and multiple_of <= 0:
        raise CompileError(f"multipleOf must be positive, not {multiple_of}",
                           location=f"{location}/multipleOf")
    if minimum is not None and maximum is not None and minimum > maximum:
        raise CompileError(f"no integer lies between {minimum} and {maximum}",
                           location=f"{location}/maximum")
    if multiple_of is not None and multiple_of > 1:
        if minimum is not None and maximum is not None and \
                (maximum - minimum) // multiple_of <= MAX_ENUMERATED_MULTIPLES:
            first = -(-minimum // multiple_of) * multiple_of
            values = range(first, maximum + 1, multiple_of)
            texts = [str(v) for v in values] + (["-0"] if 0 in values else [])
            if not texts:
                raise CompileError(f"no multiple of {multiple_of} lies between {minimum} and "
                                   f"{maximum}", location=f"{location}/multipleOf")
            return Alternate(tuple(literal(t) for t in texts))
        node = intersect(_integer_range(minimum, maximum),
                         _multiple_automaton(multiple_of, 0, f"{location}/multipleOf"),
                         location=f"{location}/multipleOf")
        if is_empty(node):
            raise CompileError("no integer satisfies this schema", location=location)
        return node
    return _integer_range(minimum, maximum)


def json_number(*, minimum: Decimal | None = None, maximum: Decimal | None = None,
                exclusive_minimum: bool = False, exclusive_maximum: bool = False,
                multiple_of: Decimal | None = None, location: str = "") -> Node:
    """JSON number texts whose value lies within the bounds (exclusive if asked) and is a
    multiple of ``multiple_of`` (see the module docstring for exponent forms)."""
    low = _decimal(minimum, f"{location}/minimum")
    high = _decimal(maximum, f"{location}/maximum")
    step = _decimal(multiple_of, f"{location}/multipleOf")
    if step is not None and step <= 0:
        raise CompileError(f"multipleOf must be positive, not {multiple_of}",
                           location=f"{location}/multipleOf")
    if low is not None and high is not None and \
            (low > high or (low == high and (exclusive_minimum or exclusive_maximum))):
        raise CompileError(f"no number lies between {low} and {high}",
                           location=f"{location}/maximum")
    sides = []
    if low is not None:
        sides.append(_bound(low, "gt" if exclusive_minimum else "ge"))
    if high is not None:
        sides.append(_bound(high, "lt" if exclusive_maximum else "le"))
    node: Node = Concat((Repeat(_MINUS, 0, 1), _UNSIGNED))
    if len(sides) == 1:
        node = sides[0]
    elif len(sides) == 2:
        node = intersect(sides[0], sides[1], location=location)
    if step is not None:
        sign, digits, exponent = step.normalize().as_tuple()
        scale = max(0, -int(exponent))
        divisor = int(step.scaleb(scale))
        if divisor > 1 or scale > 0:
            node = intersect(node, _multiple_automaton(divisor, scale, f"{location}/multipleOf"),
                             location=f"{location}/multipleOf")
        else:  # a multiple of 1: an integer, with any number of zero fraction digits
            node = intersect(node, Concat((Repeat(_MINUS, 0, 1), _NUMERAL, _ZERO_FRACTION)),
                             location=location)
    if is_empty(node):
        raise CompileError("no number satisfies this schema", location=location)
    return node


# -- integers ------------------------------------------------------------------------------
def _integer_range(minimum: int | None, maximum: int | None) -> Node:
    parts: list[Node] = []
    if maximum is None or maximum >= 0:
        parts.append(numerals(max(minimum, 0) if minimum is not None else 0, maximum))
    if minimum is None or minimum < 0:
        high_abs = None if minimum is None else -minimum
        low_abs = 1 if maximum is None or maximum >= 0 else -maximum
        parts.append(Concat((_MINUS, numerals(low_abs, high_abs))))
    if (minimum is None or minimum <= 0) and (maximum is None or maximum >= 0):
        parts.append(literal("-0"))
    return _alt([p for p in parts if not is_empty(p)])


def numerals(low: int, high: int | None) -> Node:
    """Canonical decimal numerals (``0`` or no leading zero) of ``low``..``high``."""
    if high is not None and low > high:
        return EMPTY_LANGUAGE
    parts: list[Node] = []
    if low == 0:
        parts.append(literal("0"))
        low = 1
        if high == 0:
            return parts[0]
    a = str(low)
    if high is None:
        parts += [_same_length(a, "9" * len(a)), Concat((_NONZERO, Repeat(_DIGIT, len(a), None)))]
        return _alt(parts)
    b = str(high)
    if len(a) == len(b):
        parts.append(_same_length(a, b))
    else:
        parts.append(_same_length(a, "9" * len(a)))
        if len(b) - len(a) >= 2:
            parts.append(Concat((_NONZERO, Repeat(_DIGIT, len(a), len(b) - 2))))
        parts.append(_same_length("1" + "0" * (len(b) - 1), b))
    return _alt(parts)


def _same_length(x: str, y: str) -> Node:
    """Digit strings of ``len(x)`` between ``x`` and ``y`` (``x <= y``, equal lengths)."""
    if x == y:
        return literal(x)
    i = next(k for k in range(len(x)) if x[k] != y[k])
    xi, yi, rest = int(x[i]), int(y[i]), len(x) - i - 1
    branches = [Concat((literal(x[i]), _at_least(x[i + 1:])))]
    if yi - xi >= 2:
        branches.append(Concat((_digits(xi + 1, yi - 1), Repeat(_DIGIT, rest, rest))))
    branches.append(Concat((literal(y[i]), _at_most(y[i + 1:]))))
    return Concat(((literal(x[:i]),) if i else ()) + (Alternate(tuple(branches)),))


def _at_least(s: str) -> Node:
    """Digit strings of ``len(s)`` that are >= ``s``."""
    if not s.strip("0"):
        return Repeat(_DIGIT, len(s), len(s))
    d = int(s[0])
    options = [Concat((literal(s[0]), _at_least(s[1:])))]
    if d < 9:
        options.append(Concat((_digits(d + 1, 9), Repeat(_DIGIT, len(s) - 1, len(s) - 1))))
    return _alt(options)


def _at_most(s: str) -> Node:
    """Digit strings of ``len(s)`` that are <= ``s``."""
    if not s.strip("9"):
        return Repeat(_DIGIT, len(s), len(s))
    d = int(s[0])
    options = [Concat((literal(s[0]), _at_most(s[1:])))]
    if d > 0:
        options.append(Concat((_digits(0, d - 1), Repeat(_DIGIT, len(s) - 1, len(s) - 1))))
    return _alt(options)


def _digits(lo: int, hi: int) -> Node:
    return CharSet(((48 + lo, 48 + hi),)) if lo <= hi else EMPTY_LANGUAGE


def _alt(nodes: list[Node]) -> Node:
    nodes = [n for n in nodes if not is_empty(n)]
    if not nodes:
        return EMPTY_LANGUAGE
    return nodes[0] if len(nodes) == 1 else Alternate(tuple(nodes))


# -- decimals ------------------------------------------------------------------------------
def _decimal(value: object, location: str) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise CompileError(f"expected a number, not {value!r}", location=location)
    try:
        out = value if isinstance(value, Decimal) else Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise CompileError(f"expected a number, not {value!r}", location=location) from None
    if not out.is_finite():
        raise CompileError(f"expected a finite number, not {value!r}", location=location)
    return out


_FLIP = {"ge": "le", "gt": "lt", "le": "ge", "lt": "gt"}


def _bound(c: Decimal, op: str) -> Node:
    """Signed number texts ``x`` with ``x op c`` (``op``: ge, gt, le, lt)."""
    lower = op in ("ge", "gt")
    signed_any = Concat((_MINUS, _UNSIGNED))
    if c > 0:
        return _magnitude(c, op) if lower else _alt([_magnitude(c, op), signed_any])
    if c == 0:
        if op == "ge":
            return _alt([_UNSIGNED, Concat((_MINUS, _ZERO))])
        if op == "gt":
            return _NONZERO_UNSIGNED
        if op == "le":
            return _alt([_ZERO, signed_any])
        return Concat((_MINUS, _NONZERO_UNSIGNED))
    negative = Concat((_MINUS, _magnitude(-c, _FLIP[op])))
    return _alt([_UNSIGNED, negative]) if lower else negative


def _magnitude(c: Decimal, op: str) -> Node:
    """Unsigned number texts with value ``op c``, for ``c > 0``."""
    whole, _, frac = f"{c:f}".partition(".")
    frac = frac.rstrip("0")
    int_part = int(whole)
    bigger = Concat((numerals(int_part + 1, None), _FRACTION))
    smaller = Concat((numerals(0, int_part - 1), _FRACTION)) if int_part else EMPTY_LANGUAGE
    plain = _alt([bigger if op in ("ge", "gt") else smaller,
                  Concat((literal(whole), _fraction_cmp(frac, op)))])
    zero_with_exponent = Concat((literal("0"), _ZERO_FRACTION, _EXPONENT))
    return _alt([plain, _scientific(c, op)] + ([zero_with_exponent] if op in ("le", "lt") else []))


def _scientific(c: Decimal, op: str) -> Node:
    """Normalised scientific texts ``d[.ddd]e±k`` (d ≠ 0) with value ``op c`` (c > 0)."""
    _, digits, exponent = c.normalize().as_tuple()
    magnitude = len(digits) - 1 + int(exponent)
    lead, rest = digits[0], "".join(map(str, digits[1:]))
    mantissa_any = Concat((_NONZERO, _FRACTION))
    if op in ("ge", "gt"):
        mantissa = _alt([Concat((_digits(lead + 1, 9), _FRACTION)),
                         Concat((literal(str(lead)), _fraction_cmp(rest, op)))])
        far = _exponent_range(magnitude + 1, None)
    else:
        mantissa = _alt([Concat((_digits(1, lead - 1), _FRACTION)),
                         Concat((literal(str(lead)), _fraction_cmp(rest, op)))])
        far = _exponent_range(None, magnitude - 1)
    return _alt([Concat((mantissa_any, _E, far)),
                 Concat((mantissa, _E, _exponent_range(magnitude, magnitude)))])


def _exponent_range(low: int | None, high: int | None) -> Node:
    """Exponent digits (optional sign, leading zeros allowed) with value in the range."""
    zeros = Repeat(literal("0"), 0, None)
    parts: list[Node] = []
    if high is None or high >= 0:
        parts.append(Concat((Repeat(literal("+"), 0, 1), zeros,
                             numerals(max(low, 0) if low is not None else 0, high))))
    if low is None or low < 0:
        high_abs = None if low is None else -low
        low_abs = 1 if high is None or high >= 0 else -high
        parts.append(Concat((_MINUS, zeros, numerals(low_abs, high_abs))))
    if (low is None or low <= 0) and (high is None or high >= 0):
        parts.append(Concat((_MINUS, Repeat(literal("0"), 1, None))))
    return _alt(parts)


def _fraction_cmp(f: str, op: str) -> Node:
    """Optional fractions ``.ddd`` (or none) whose value ``0.ddd`` is ``op 0.f``
    (``f`` has no trailing zero)."""
    dot = literal(".")
    any_digits = Repeat(_DIGIT, 0, None)
    if not f:
        return {"ge": _FRACTION,
                "gt": Concat((dot, any_digits, _NONZERO, any_digits)),
                "le": _ZERO_FRACTION,
                "lt": EMPTY_LANGUAGE}[op]
    options: list[Node] = []
    for i, ch in enumerate(f):
        d = int(ch)
        other = _digits(d + 1, 9) if op in ("ge", "gt") else _digits(0, d - 1)
        options.append(Concat((literal(f[:i]) if i else EMPTY, other, any_digits)))
    if op == "ge":
        options.append(Concat((literal(f), any_digits)))
    elif op == "gt":
        options.append(Concat((literal(f), any_digits, _NONZERO, any_digits)))
    else:
        options += [literal(f[:j]) for j in range(1, len(f))]
        if op == "le":
            options.append(Concat((literal(f), Repeat(literal("0"), 0, None))))
    after_dot = Concat((dot, _alt(options)))
    return after_dot if op in ("ge", "gt") else Alternate((EMPTY, after_dot))


# -- multipleOf ----------------------------------------------------------------------------
def _multiple_automaton(divisor: int, scale: int, location: str) -> Automaton:
    """Plain number texts (sign, digits, optional fraction) whose value times ``10**scale``
    is an integer divisible by ``divisor``: the digits read modulo ``divisor``.

    States: 0 start, 1 after ``-``, ``2 + r`` integer part with remainder r, then for
    ``j`` = 0..scale fraction digits read, ``base_j + r``; digits past ``scale`` must be 0.
    """
    n_states = 2 + divisor * (scale + 2)
    if n_states > MAX_MULTIPLE_STATES:
        raise CompileError(f"multipleOf {divisor}e-{scale} needs {n_states} automaton states "
                           f"(more than {MAX_MULTIPLE_STATES})", location=location)
    r = np.arange(divisor)
    d = np.arange(10)
    nxt = (10 * r[:, None] + d[None, :]) % divisor  # (divisor, 10)

    def block(src_base: np.ndarray | int, dst_base: int, table: np.ndarray) -> np.ndarray:
        src = np.broadcast_to(np.asarray(src_base)[..., None], table.shape)
        return np.stack([src, 48 + np.broadcast_to(d, table.shape),
                         48 + np.broadcast_to(d, table.shape), dst_base + table],
                        axis=-1).reshape(-1, 4)

    int_base = 2
    frac_base = [2 + divisor * (j + 1) for j in range(scale + 1)]
    edges = [np.array([[0, 45, 45, 1]]),
             block(np.array([0, 1]), int_base, np.tile(d % divisor, (2, 1))),
             block(int_base + r, int_base, nxt),
             np.stack([int_base + r, np.full(divisor, 46), np.full(divisor, 46),
                       frac_base[0] + r], axis=1)]
    for j in range(scale):
        edges.append(block(frac_base[j] + r, frac_base[j + 1], nxt))
    last = frac_base[scale]
    edges.append(np.stack([last + r, np.full(divisor, 48), np.full(divisor, 48), last + r], axis=1))
    accepting = [int_base + x for x in range(divisor) if x * 10 ** scale % divisor == 0]
    for j in range(scale + 1):
        accepting += [frac_base[j] + x for x in range(divisor)
                      if x * 10 ** (scale - j) % divisor == 0]
    all_edges = np.concatenate(edges).astype(np.int32)
    all_edges.flags.writeable = False
    return Automaton(n_states, all_edges, 0, tuple(sorted(accepting)), location)
