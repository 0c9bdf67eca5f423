"""Exponent-form number texts (``15e-1``, ``1.0E+2``, ``0.5e1``) under value constraints.

A text ``M e k`` has the value of its plain mantissa ``M`` times ``10**k``. Over every
``k`` the texts in a range or of a multiple are not a regular language (``0.0…01e+k ≥ 1``
couples a count of zeros with ``k``), so each construction is exact for the mantissas a
writer of numbers uses and sound (never accepting a wrong value) for the rest:

- **Bounds** (:func:`exponent_interval`): a non-zero mantissa has a *magnitude* ``m`` (the
  power of ten of its first non-zero digit: ``123.4`` → 2, ``0.05`` → -2) and significand
  digits ``D``; its value's magnitude is ``m + k``, so it lies in a range iff ``m + k`` lies
  strictly inside the bounds' magnitudes, or equals one and ``D`` compares right with that
  bound's digits. One term per ``m`` with ``|m| <=`` :data:`MANTISSA_DIGITS`: exact for
  every such mantissa, whatever its length or exponent.
- **multipleOf** (:func:`exponent_forms`): for one ``k`` the mantissas form a plain
  language the caller builds exactly (the divisor scaled by ``10**-k``); one term per
  ``k`` in a window chosen by the caller, and beyond it, where for a mantissa of at most
  :data:`MANTISSA_DIGITS` digits the answer no longer depends on ``k``, two tails limited
  to such mantissas.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache

import numpy as np

from tether.automata.boolean import EMPTY_LANGUAGE, Dfa, intersect, is_empty, to_dfa
from tether.automata.regex_ast import Alternate, Automaton, CharSet, Concat, Node, Repeat, literal

MANTISSA_DIGITS = 20

_DIGIT = CharSet(((48, 57),))
_NONZERO = CharSet(((49, 57),))
_E = CharSet(((69, 69), (101, 101)))
_ZEROS = Repeat(literal("0"), 0, None)


def exponent_interval(low: Decimal | None, high: Decimal | None, *, low_open: bool = False,
                      high_open: bool = False) -> Node:
    """Signed exponent-form texts (non-zero mantissa) with a value between ``low`` and
    ``high`` (None: unbounded; ``*_open``: exclusive)."""
    parts: list[Node] = []
    if high is None or high > 0:  # positive values
        lower = (low, low_open) if low is not None and low > 0 else None
        parts.append(_unsigned_interval(lower, None if high is None else (high, high_open)))
    if low is None or low < 0:  # negative values: -v with -high <= v <= -low
        lower = (-high, high_open) if high is not None and high < 0 else None
        upper = None if low is None else (-low, low_open)
        parts.append(Concat((literal("-"), _unsigned_interval(lower, upper))))
    return alternation(parts)


@lru_cache(maxsize=256)  # (~10 ms to build; schemas repeat their bounds: 0..100, 1..5)
def _unsigned_interval(lower: tuple[Decimal, bool] | None,
                       upper: tuple[Decimal, bool] | None) -> Node:
    """Unsigned exponent-form texts, non-zero mantissa, value within ``(bound, open)``
    limits (each positive, or None). Cached: the nodes are immutable and name no place
    in a schema."""
    if lower is None and upper is None:  # every non-zero value: no magnitude matters
        return Concat((_NONZERO_MANTISSA, _E, exponent_range(None, None)))
    lo_mag = lower[0].adjusted() if lower else None
    hi_mag = upper[0].adjusted() if upper else None
    lo_sig = _significand_cmp(lower[0], "gt" if lower[1] else "ge") if lower else None
    hi_sig = _significand_cmp(upper[0], "lt" if upper[1] else "le") if upper else None
    same = lo_sig is not None and hi_sig is not None and lo_mag == hi_mag
    both_sig = intersect(lo_sig, hi_sig) if same else None
    terms: list[Node] = []
    for m in _MAGNITUDES:
        # the exponents k putting the value's magnitude m + k at each bound, and between
        k_lo = None if lo_mag is None else lo_mag - m
        k_hi = None if hi_mag is None else hi_mag - m
        if same:
            terms.append(Concat((_mantissa(m, both_sig), _E, exponent_range(k_lo, k_lo))))
            continue
        if k_lo is not None:
            terms.append(Concat((_mantissa(m, lo_sig), _E, exponent_range(k_lo, k_lo))))
        if k_hi is not None:
            terms.append(Concat((_mantissa(m, hi_sig), _E, exponent_range(k_hi, k_hi))))
        between = exponent_range(None if k_lo is None else k_lo + 1,
                                 None if k_hi is None else k_hi - 1)
        if not is_empty(between):
            terms.append(Concat((_mantissa(m, _ANY_SIGNIFICAND), _E, between)))
    return alternation(terms)


def _significand_cmp(c: Decimal, op: str) -> Node:
    """Significand digit strings ``D`` (first digit non-zero) with ``0.D op 0.S``, ``S``
    the significant digits of ``c > 0`` (op: ge, gt, le, lt)."""
    s = "".join(map(str, c.normalize().as_tuple().digits))
    any_digits = Repeat(_DIGIT, 0, None)
    greater = op in ("ge", "gt")
    options: list[Node] = []
    for i, ch in enumerate(s):
        d = int(ch)
        other = digits(d + 1, 9) if greater else digits(1 if i == 0 else 0, d - 1)
        options.append(Concat((literal(s[:i]), other, any_digits)) if i else
                       Concat((other, any_digits)))
    if op == "ge":
        options.append(Concat((literal(s), any_digits)))
    elif op == "gt":
        options.append(Concat((literal(s), any_digits, _NONZERO, any_digits)))
    else:
        options += [Concat((literal(s[:j]), _ZEROS)) for j in range(1, len(s))]
        if op == "le":
            options.append(Concat((literal(s), _ZEROS)))
    return alternation(options)


def _mantissa(m: int, significand: Node) -> Node:
    """Plain unsigned mantissas of magnitude ``m`` whose significand digits are in
    ``significand``: ``0.`` and ``-m - 1`` zeros before them when ``m < 0``, else the
    digits with a point after the first ``m + 1`` (when more follow)."""
    if m < 0:
        return Concat((literal("0." + "0" * (-m - 1)), significand))
    return _point_after(to_dfa(significand), m + 1)


def _point_after(sig: Dfa, whole: int) -> Node:
    """The strings of ``sig`` (digit strings of at least ``whole`` digits) with a ``.``
    after the first ``whole`` digits when more digits follow."""
    n = sig.n_states
    rows = []
    for q in range(1, n):
        for d in range(10):
            t = int(sig.table[q, sig.class_of_byte[48 + d]])
            if t:
                rows.append((q, d, t))
    # blocks of n states: digits read in the whole part (0..whole), after the point, in
    # the fraction (at least one digit read)
    point, fraction = whole + 1, whole + 2
    edges = [(i * n + q, 48 + d, 48 + d, (i + 1) * n + t)
             for i in range(whole) for q, d, t in rows]
    edges += [(whole * n + q, 46, 46, point * n + q) for q in range(1, n)]
    edges += [(block * n + q, 48 + d, 48 + d, fraction * n + t)
              for block in (point, fraction) for q, d, t in rows]
    accepting = tuple(sorted(b * n + q for b in (whole, fraction)
                             for q in range(1, n) if sig.accepting[q]))
    table = np.array(edges, dtype=np.int32).reshape(-1, 4)
    table.flags.writeable = False
    return Automaton((fraction + 1) * n, table, sig.start, accepting)


def exponent_forms(mantissas: Callable[[int], Node], low: int, high: int) -> Node:
    """Texts ``M[eE]k`` with ``M`` in ``mantissas(k)`` for ``low <= k <= high``, and in
    ``mantissas(low)`` / ``mantissas(high)``, short mantissas only, beyond."""
    terms = [Concat((m, _E, exponent_range(k, k)))
             for k in range(low, high + 1) if not is_empty(m := mantissas(k))]
    for edge, beyond in ((low, exponent_range(None, low - 1)),
                         (high, exponent_range(high + 1, None))):
        short = intersect(mantissas(edge), SHORT_MANTISSA)
        if not is_empty(short):
            terms.append(Concat((short, _E, beyond)))
    return alternation(terms)


def exponent_range(low: int | None, high: int | None) -> Node:
    """Exponent digits (optional sign, leading zeros allowed) with a value in the range."""
    parts: list[Node] = []
    if high is None or high >= 0:
        parts.append(Concat((Repeat(literal("+"), 0, 1), _ZEROS,
                             numerals(max(low, 0) if low is not None else 0, high))))
    if low is None or low < 0:
        high_abs = None if low is None else -low
        low_abs = 1 if high is None or high >= 0 else -high
        parts.append(Concat((literal("-"), _ZEROS, numerals(low_abs, high_abs))))
    if (low is None or low <= 0) and (high is None or high >= 0):
        parts.append(Concat((literal("-"), Repeat(literal("0"), 1, None))))
    return alternation(parts)


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
        parts += [_same_length(a, "9" * len(a)),
                  Concat((_NONZERO, Repeat(_DIGIT, len(a), None)))]
        return alternation(parts)
    b = str(high)
    if len(a) == len(b):
        parts.append(_same_length(a, b))
    else:
        parts.append(_same_length(a, "9" * len(a)))
        if len(b) - len(a) >= 2:
            parts.append(Concat((_NONZERO, Repeat(_DIGIT, len(a), len(b) - 2))))
        parts.append(_same_length("1" + "0" * (len(b) - 1), b))
    return alternation(parts)


def _same_length(x: str, y: str) -> Node:
    """Digit strings of ``len(x)`` between ``x`` and ``y`` (``x <= y``, equal lengths)."""
    if x == y:
        return literal(x)
    i = next(k for k in range(len(x)) if x[k] != y[k])
    xi, yi, rest = int(x[i]), int(y[i]), len(x) - i - 1
    branches = [Concat((literal(x[i]), _at_least(x[i + 1:])))]
    if yi - xi >= 2:
        branches.append(Concat((digits(xi + 1, yi - 1), Repeat(_DIGIT, rest, rest))))
    branches.append(Concat((literal(y[i]), _at_most(y[i + 1:]))))
    return Concat(((literal(x[:i]),) if i else ()) + (Alternate(tuple(branches)),))


def _at_least(s: str) -> Node:
    """Digit strings of ``len(s)`` that are >= ``s``: ``s`` itself, or equal up to some
    position and greater there (a flat union: no recursion on long bounds)."""
    options = [literal(s)] + [
        Concat((literal(s[:i]), digits(int(s[i]) + 1, 9), Repeat(_DIGIT, len(s) - i - 1,
                                                                 len(s) - i - 1)))
        for i in range(len(s)) if s[i] != "9"]
    return alternation(options)


def _at_most(s: str) -> Node:
    """Digit strings of ``len(s)`` that are <= ``s`` (see :func:`_at_least`)."""
    options = [literal(s)] + [
        Concat((literal(s[:i]), digits(0, int(s[i]) - 1), Repeat(_DIGIT, len(s) - i - 1,
                                                                 len(s) - i - 1)))
        for i in range(len(s)) if s[i] != "0"]
    return alternation(options)


def digits(lo: int, hi: int) -> Node:
    """One digit from ``lo`` to ``hi`` (no string when ``lo > hi``)."""
    return CharSet(((48 + lo, 48 + hi),)) if lo <= hi else EMPTY_LANGUAGE


def alternation(nodes: list[Node]) -> Node:
    """The union of the non-empty ``nodes`` (:data:`EMPTY_LANGUAGE` when none)."""
    nodes = [n for n in nodes if not is_empty(n)]
    if not nodes:
        return EMPTY_LANGUAGE
    return nodes[0] if len(nodes) == 1 else Alternate(tuple(nodes))


def _short_mantissa() -> Node:
    """Signed plain mantissas of at most :data:`MANTISSA_DIGITS` digits."""
    forms = [Repeat(_DIGIT, MANTISSA_DIGITS, MANTISSA_DIGITS)] + [
        Concat((Repeat(_DIGIT, whole, whole),
                Repeat(Concat((literal("."), Repeat(_DIGIT, 1, MANTISSA_DIGITS - whole))), 0, 1)))
        for whole in range(1, MANTISSA_DIGITS)]
    return Concat((Repeat(literal("-"), 0, 1), Alternate(tuple(forms))))


SHORT_MANTISSA = _short_mantissa()
_MAGNITUDES = range(-MANTISSA_DIGITS, MANTISSA_DIGITS + 1)
_ANY_SIGNIFICAND = Concat((_NONZERO, Repeat(_DIGIT, 0, None)))
_NONZERO_MANTISSA = Alternate((
    Concat((_ANY_SIGNIFICAND, Repeat(Concat((literal("."), Repeat(_DIGIT, 1, None))), 0, 1))),
    Concat((literal("0."), Repeat(_DIGIT, 0, None), _ANY_SIGNIFICAND))))
