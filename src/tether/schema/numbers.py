"""The JSON number texts a numeric schema allows, exactly (SPEC §5).

Bounds become digit automata: a canonical numeral (no leading zero) is compared with a
bound digit by digit (a longer numeral is larger; at equal length the first differing
digit decides), a fraction by the first differing digit of its padded expansion. Both
are regular, so ``minimum``/``maximum`` (inclusive or exclusive, integer or decimal) are
enforced exactly on plain texts (``-12``, ``0.25``, ``-0``, ``3.10``).

Exponent forms (``1e-05``, ``15e-1``, ``0.5E+1``): exactly all of them when no magnitude
matters (no bound, or bounds at 0). Under a non-zero bound, ``multipleOf`` or an exact value
(``const``/``enum``) they are built by :mod:`~tether.schema.number_exponents`: exact for
every mantissa of up to 20 digits, sound for longer ones.

``multipleOf`` reads the digits modulo the divisor (a decimal divisor ``a·10⁻ˢ`` allows at
most ``s`` significant fraction digits). Divisors needing too many states raise
:class:`~tether.errors.CompileError` at ``…/multipleOf``.

Integers are ``-?(0|[1-9][0-9]*)``; integer-valued texts such as ``1.0`` or ``1e2`` are
not accepted as integers (rejected, never wrongly accepted).
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path

import numpy as np

from tether.automata.boolean import (
    EMPTY_LANGUAGE,
    Dfa,
    difference_dfa,
    intersect,
    intersect_dfa,
    is_empty,
    to_dfa,
    to_node,
)
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
from tether.cache_dir import arrays_cached
from tether.errors import CompileError
from tether.schema.number_exponents import (
    MANTISSA_DIGITS,
    alternation,
    digits,
    exponent_forms,
    exponent_interval,
    numerals,
)

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
_PLAIN = Concat((_NUMERAL, _FRACTION))
_UNSIGNED = Concat((_NUMERAL, _FRACTION, Repeat(_EXPONENT, 0, 1)))
_PLAIN_ZERO = Concat((literal("0"), _ZERO_FRACTION))
_NON_INTEGER = Concat((Repeat(_MINUS, 0, 1), _NUMERAL, literal("."), Repeat(_DIGIT, 0, None),
                       _NONZERO, Repeat(_DIGIT, 0, None)))
_PLAIN_NONZERO = Alternate((
    Concat((_NONZERO, Repeat(_DIGIT, 0, None), _FRACTION)),
    Concat((literal("0."), Repeat(_DIGIT, 0, None), _NONZERO, Repeat(_DIGIT, 0, None)))))


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
        where = f"{location}/multipleOf"
        try:
            multiples = _multiple_automaton(multiple_of, 0)
        except CompileError as e:
            raise CompileError(e.message, location=where) from None
        node = intersect(_integer_range(minimum, maximum), multiples, location=where)
        if is_empty(node):
            raise CompileError("no integer satisfies this schema", location=location)
        return node
    return _integer_range(minimum, maximum)


def json_number(*, minimum: Decimal | None = None, maximum: Decimal | None = None,
                exclusive_minimum: bool = False, exclusive_maximum: bool = False,
                multiple_of: Decimal | None = None, fractional: bool = False,
                location: str = "") -> Node:
    """JSON number texts whose value lies within the bounds (exclusive if asked) and is a
    multiple of ``multiple_of`` (see the module docstring for exponent forms); with
    ``fractional``, plain decimals with a non-zero fraction digit only (not integers)."""
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
    node: Node = Concat((Repeat(_MINUS, 0, 1), _UNSIGNED))
    if step is not None:
        where = f"{location}/multipleOf"
        try:
            node = _stepped(low, high, exclusive_minimum, exclusive_maximum, step.normalize())
        except CompileError as e:
            raise type(e)(e.message, location=where) from None
        if isinstance(node, Automaton):
            node = replace(node, pos=where)
    elif low is not None or high is not None:
        node = _bounded(low, high, exclusive_minimum, exclusive_maximum, location)
    if fractional:
        node = intersect(node, _NON_INTEGER, location=location)
    if is_empty(node):
        raise CompileError("no number satisfies this schema", location=location)
    return node


def without_multiples(node: Node, steps: list[Decimal], location: str) -> Node | None:
    """The number texts of ``node`` whose value is a multiple of none of ``steps``
    (the complement of ``multipleOf``; any spelling, as :func:`_multiples` reads it);
    None if none is left."""
    where = f"{location}/multipleOf"
    dfa = to_dfa(node, location=where)
    for step in steps:
        dfa = difference_dfa(dfa, _multiples(step, where), location=where)
    return None if dfa.is_empty() else to_node(dfa, pos=where)


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
    return alternation([p for p in parts if not is_empty(p)])


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


def _bounded(low: Decimal | None, high: Decimal | None, low_open: bool, high_open: bool,
             location: str) -> Node:
    """Number texts (any spelling) with a value between ``low`` and ``high``."""
    if low is not None and low == high:
        plain = _plain_exact(low)
    else:
        sides = [_plain_bound(c, op) for c, op in (
            (low, "gt" if low_open else "ge"), (high, "lt" if high_open else "le"))
            if c is not None]
        plain = sides[0] if len(sides) == 1 else intersect(*sides, location=location)
    zero_in_range = ((low is None or low < 0 or (low == 0 and not low_open))
                     and (high is None or high > 0 or (high == 0 and not high_open)))
    zero_forms = Concat((Repeat(_MINUS, 0, 1), literal("0"), _ZERO_FRACTION, _EXPONENT))
    return alternation([plain, zero_forms if zero_in_range else EMPTY_LANGUAGE,
                        exponent_interval(low, high, low_open=low_open, high_open=high_open)])


def _plain_bound(c: Decimal, op: str) -> Node:
    """Signed plain texts ``x`` (no exponent) with ``x op c`` (op: ge, gt, le, lt)."""
    if c == 0:
        return {"ge": alternation([_PLAIN, Concat((_MINUS, _PLAIN_ZERO))]),
                "gt": _PLAIN_NONZERO,
                "le": alternation([_PLAIN_ZERO, Concat((_MINUS, _PLAIN))]),
                "lt": Concat((_MINUS, _PLAIN_NONZERO))}[op]
    if c > 0:
        if op in ("ge", "gt"):
            return _magnitude(c, op)
        return alternation([_magnitude(c, op), Concat((_MINUS, _PLAIN))])
    negative = Concat((_MINUS, _magnitude(-c, _FLIP[op])))
    return alternation([_PLAIN, negative]) if op in ("ge", "gt") else negative


def _plain_exact(c: Decimal) -> Node:
    """The plain spellings of ``c``: its digits, then any zero fraction digits."""
    if c == 0:
        return Concat((Repeat(_MINUS, 0, 1), _PLAIN_ZERO))
    text = format(c.normalize(), "f")
    zeros = Repeat(literal("0"), 0, None) if "." in text else _ZERO_FRACTION
    return Concat((literal(text), zeros))


def _magnitude(c: Decimal, op: str) -> Node:
    """Unsigned plain texts (no exponent) with value ``op c``, for ``c > 0``."""
    whole, _, frac = f"{c:f}".partition(".")
    frac = frac.rstrip("0")
    int_part = int(whole)
    bigger = Concat((numerals(int_part + 1, None), _FRACTION))
    smaller = Concat((numerals(0, int_part - 1), _FRACTION)) if int_part else EMPTY_LANGUAGE
    return alternation([bigger if op in ("ge", "gt") else smaller,
                 Concat((literal(whole), _fraction_cmp(frac, op)))])


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
        other = digits(d + 1, 9) if op in ("ge", "gt") else digits(0, d - 1)
        options.append(Concat((literal(f[:i]) if i else EMPTY, other, any_digits)))
    if op == "ge":
        options.append(Concat((literal(f), any_digits)))
    elif op == "gt":
        options.append(Concat((literal(f), any_digits, _NONZERO, any_digits)))
    else:
        options += [literal(f[:j]) for j in range(1, len(f))]
        if op == "le":
            options.append(Concat((literal(f), Repeat(literal("0"), 0, None))))
    after_dot = Concat((dot, alternation(options)))
    return after_dot if op in ("ge", "gt") else Alternate((EMPTY, after_dot))


# -- multipleOf ----------------------------------------------------------------------------
@lru_cache(maxsize=64)  # (determinising a bounded number costs 10-150 ms; prices recur)
def _stepped(low: Decimal | None, high: Decimal | None, low_open: bool, high_open: bool,
             step: Decimal) -> Node:
    """The number texts (any spelling) between the bounds (None: unbounded) whose value
    is a multiple of ``step > 0``, at no place (the caller puts it at its own)."""
    node: Node = Concat((Repeat(_MINUS, 0, 1), _UNSIGNED))
    if low is not None or high is not None:
        node = _bounded(low, high, low_open, high_open, "")
    return to_node(intersect_dfa(to_dfa(node), _multiples_dfa(step)))


def _multiples(step: Decimal, location: str) -> Dfa:
    """The DFA of the number texts (any spelling) whose value is a multiple of ``step > 0``
    (cached: one divisor recurs across a schema's properties and across schemas)."""
    try:
        return _multiples_dfa(step.normalize())
    except CompileError as e:
        raise type(e)(e.message, location=location) from None


@lru_cache(maxsize=64)
def _multiples_dfa(step: Decimal) -> Dfa:
    """:func:`_multiples`, kept on disk too (determinising the exponent spellings takes
    ~0.5 s, the automaton ~4,000 states): under a name that changes with the code that
    builds it."""
    digest = _builder_digest()
    if digest is None:
        return _build_multiples(step)
    arrays = arrays_cached(f"multiples-{digest}-{step}", _DFA_FIELDS,
                           lambda: _dfa_arrays(_build_multiples(step)))
    return Dfa(arrays["table"], arrays["class_of_byte"], arrays["accepting"],
               int(arrays["start"]))


_DFA_FIELDS = ("table", "class_of_byte", "accepting", "start")


def _dfa_arrays(automaton: Dfa) -> dict[str, np.ndarray]:
    return {"table": automaton.table, "class_of_byte": automaton.class_of_byte,
            "accepting": automaton.accepting, "start": np.array(automaton.start)}


# The modules whose code builds a multiples automaton (the key of its on-disk copy).
_BUILDERS = ("tether.schema.numbers", "tether.schema.number_exponents",
             "tether.automata.boolean", "tether.automata.dfa", "tether.automata.nfa",
             "tether.automata.regex_ast")


@lru_cache(maxsize=1)
def _builder_digest() -> str | None:
    """A digest of the source of :data:`_BUILDERS`; None if it cannot be read (then
    nothing is kept on disk)."""
    digest = hashlib.blake2b(digest_size=8)
    try:
        for name in _BUILDERS:
            digest.update(Path(sys.modules[name].__file__ or "").read_bytes())
    except (KeyError, OSError):
        return None
    return digest.hexdigest()


def _build_multiples(step: Decimal) -> Dfa:
    _, step_digits, exponent = step.as_tuple()
    divisor, scale = int("".join(map(str, step_digits))), -int(exponent)
    twos = fives = 0
    while divisor % 2 ** (twos + 1) == 0:
        twos += 1
    while divisor % 5 ** (fives + 1) == 0:
        fives += 1
    # past this window a short mantissa is a multiple iff only its digits' residue says so
    low, high = -scale - MANTISSA_DIGITS, MANTISSA_DIGITS - scale + max(twos, fives)
    return to_dfa(alternation([_plain_multiples(divisor, scale), exponent_forms(
        lambda k: _plain_multiples(divisor, scale + k), low, high)]))


def _plain_multiples(divisor: int, scale: int) -> Node:
    """Plain texts whose value is a multiple of ``divisor * 10**-scale``; for a negative
    scale, multiples of ``divisor`` followed by ``-scale`` zeros (and zero itself)."""
    if scale >= 0:
        return _multiple_automaton(divisor, scale)
    return alternation([Concat((_multiple_automaton(divisor, 0, fraction=False),
                         literal("0" * -scale), _ZERO_FRACTION)),
                 Concat((Repeat(_MINUS, 0, 1), literal("0"), _ZERO_FRACTION))])


def _multiple_automaton(divisor: int, scale: int, *, fraction: bool = True) -> Automaton:
    """Plain number texts (sign, digits, optional fraction unless ``fraction`` is False)
    whose value times ``10**scale`` is an integer divisible by ``divisor``: the digits read
    modulo ``divisor``.

    States: 0 start, 1 after ``-``, ``2 + r`` integer part with remainder r, then for
    ``j`` = 0..scale fraction digits read, ``base_j + r``; digits past ``scale`` must be 0.
    """
    n_states = 2 + divisor * (scale + 2)
    if n_states > MAX_MULTIPLE_STATES:
        raise CompileError(f"multipleOf {divisor}e-{scale} needs {n_states} automaton states "
                           f"(more than {MAX_MULTIPLE_STATES})")
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
    if not fraction:  # no '.' edge: the fraction states are unreachable, none accepts
        edges = edges[:3]
        accepting = accepting[:sum(1 for x in range(divisor) if x * 10 ** scale % divisor == 0)]
    all_edges = np.concatenate(edges).astype(np.int32)
    all_edges.flags.writeable = False
    return Automaton(n_states, all_edges, 0, tuple(sorted(accepting)))
