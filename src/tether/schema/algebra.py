"""Intersection of shapes and unions: what ``allOf``, sibling keywords and ``enum`` mean.

Two shapes of different kinds never intersect. Two of the same kind merge their
constraints (tighter bounds, both patterns, both property sets…); an enumeration is
filtered by the other side's constraints. The result is a shape, or :class:`Empty` with
the reason the constraints cannot all hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from tether.errors import LimitExceeded
from tether.schema.shapes import (
    FALSE_NID,
    Arr,
    Bool,
    KeyRegion,
    Lit,
    Null,
    Num,
    Obj,
    Refused,
    Shape,
    Str,
    Sub,
    Union,
    value_key,
)

if TYPE_CHECKING:
    from tether.schema.normalize import Normalizer

MAX_UNION = 256  # shapes a schema position may be split into
MAX_INTERSECTIONS = 40_000  # shape intersections one schema's combinators may need


@dataclass(frozen=True)
class Empty:
    reason: str


def intersect_unions(a: Union, b: Union, norm: Normalizer, where: str) -> Union:
    """Values in both ``a`` and ``b``."""
    out: list[Shape] = []
    why = a.why or b.why
    norm.intersections += len(a.shapes) * len(b.shapes)
    if norm.intersections > MAX_INTERSECTIONS:
        raise LimitExceeded(f"the schema's combinators (allOf/anyOf/oneOf/not/if) need more "
                            f"than {MAX_INTERSECTIONS} intersections of subschemas",
                            location=where)
    for x in a.shapes:
        for y in b.shapes:
            if x.kind != y.kind:
                continue
            z = intersect(x, y, norm)
            if isinstance(z, Empty):
                why = why or (z.reason, where)
            elif z not in out:
                out.append(z)
    if len(out) > MAX_UNION:
        raise LimitExceeded(f"the schema splits into more than {MAX_UNION} alternatives",
                            location=where)
    if not out and why is None:
        kinds_a = sorted({s.kind for s in a.shapes})
        kinds_b = sorted({s.kind for s in b.shapes})
        why = (f"no value is both of kind {'/'.join(kinds_a) or 'nothing'} "
               f"and of kind {'/'.join(kinds_b) or 'nothing'}", where)
    return Union(tuple(out), why if not out else None)


def intersect(a: Shape, b: Shape, norm: Normalizer) -> Shape | Empty:
    """The values in both shapes (which are of the same kind)."""
    if isinstance(a, Refused):
        return a
    if isinstance(b, Refused):
        return b
    if isinstance(b, Lit):
        a, b = b, a
    if isinstance(a, Lit):
        return _filter(a, b, norm)
    if isinstance(a, Null):
        return a
    if isinstance(a, Bool):
        values = a.values & b.values
        return Bool(values) if values else Empty("no boolean value is left")
    if isinstance(a, Num):
        return _numbers(a, b)
    if isinstance(a, Str):
        return _strings(a, b)
    if isinstance(a, Arr):
        return _arrays(a, b)
    return _objects(a, b, norm)


def _filter(a: Lit, b: Shape, norm: Normalizer) -> Shape | Empty:
    if isinstance(b, Lit):
        keys = b.keys
        texts = tuple(t for t, v in zip(a.texts, a.values, strict=True)
                      if value_key(v) in keys)
    else:
        kept = []
        for t, v in zip(a.texts, a.values, strict=True):
            verdict = norm.satisfies(v, b)
            if isinstance(verdict, Refused):
                return verdict
            if verdict:
                kept.append(t)
        texts = tuple(kept)
    return Lit(a.kind, texts) if texts else Empty("no value of the enum/const satisfies "
                                                  "the other constraints")


def _numbers(a: Num, b: Num) -> Num | Empty:
    lo, lo_excl = _tighter(a.lo, a.lo_excl, b.lo, b.lo_excl, lower=True)
    hi, hi_excl = _tighter(a.hi, a.hi_excl, b.hi, b.hi_excl, lower=False)
    out = Num(a.integer or b.integer, lo, lo_excl, hi, hi_excl, a.multiples | b.multiples,
              a.where or b.where, a.fractional or b.fractional,
              a.non_multiples | b.non_multiples)
    if out.integer and out.fractional:
        return Empty("no integer is a non-integer number")
    step = _common_multiple(out)
    for m in sorted(out.non_multiples):
        if step is not None and (step / Fraction(m)).denominator == 1:
            return Empty(f"every number allowed is a multiple of {m}")
    if out.fractional and out.lo is not None and out.lo == out.hi:
        return Empty(f"no non-integer number lies in {describe_range(out)}")
    return Empty(f"no number lies in {describe_range(out)}") if range_empty(out) else out


def _common_multiple(n: Num) -> Fraction | None:
    """The step every value of ``n`` is a multiple of (None: no such step)."""
    steps = [Fraction(m) for m in n.multiples] + ([Fraction(1)] if n.integer else [])
    return least_common_multiple(steps) if steps else None


def least_common_multiple(steps: list[Fraction]) -> Fraction:
    """The least positive number that is a multiple of every one of ``steps``."""
    return Fraction(math.lcm(*(f.numerator for f in steps)),
                    math.gcd(*(f.denominator for f in steps)))


def range_empty(n: Num) -> bool:
    """Whether no number (no integer, for an integer shape) lies in ``n``'s bounds."""
    lo, hi = n.lo, n.hi
    if n.integer:
        if lo is not None:
            lo = Decimal(math.floor(lo) + 1 if n.lo_excl or lo != int(lo) else lo)
        if hi is not None:
            hi = Decimal(math.ceil(hi) - 1 if n.hi_excl or hi != int(hi) else hi)
        return lo is not None and hi is not None and lo > hi
    if lo is None or hi is None:
        return False
    return lo > hi or (lo == hi and (n.lo_excl or n.hi_excl))


def describe_range(n: Num) -> str:
    left = "(" if n.lo_excl or n.lo is None else "["
    right = ")" if n.hi_excl or n.hi is None else "]"
    lo = "-inf" if n.lo is None else str(n.lo)
    hi = "+inf" if n.hi is None else str(n.hi)
    return f"{left}{lo}, {hi}{right}" + (" (integers)" if n.integer else "")


def _tighter(x: Decimal | None, x_excl: bool, y: Decimal | None, y_excl: bool, *,
             lower: bool) -> tuple[Decimal | None, bool]:
    if x is None:
        return y, y_excl
    if y is None or x == y:
        return x, x_excl or (y == x and y_excl)
    pick_x = (x > y) if lower else (x < y)
    return (x, x_excl) if pick_x else (y, y_excl)


def _strings(a: Str, b: Str) -> Str | Empty:
    lo = max(a.min_len, b.min_len)
    his = [h for h in (a.max_len, b.max_len) if h is not None]
    hi = min(his) if his else None
    if hi is not None and lo > hi:
        return Empty(f"minLength {lo} > maxLength {hi}")
    return Str(lo, hi, a.patterns | b.patterns, a.excluded_patterns | b.excluded_patterns,
               a.excluded_values | b.excluded_values, a.formats | b.formats,
               a.where or b.where, a.excluded_formats | b.excluded_formats)


def _arrays(a: Arr, b: Arr) -> Arr | Empty:
    n = max(len(a.prefix), len(b.prefix))
    prefix = tuple(_at(a, i) | _at(b, i) for i in range(n))
    lo = max(a.min_items, b.min_items)
    his = [h for h in (a.max_items, b.max_items) if h is not None]
    hi = min(his) if his else None
    if hi is not None and lo > hi:
        return Empty(f"minItems {lo} > maxItems {hi}")
    out = Arr(prefix, a.items | b.items, lo, hi, a.contains + b.contains, a.unique or b.unique,
              max(a.evaluated_prefix, b.evaluated_prefix), a.evaluates_all or b.evaluates_all)
    for i in range(min(lo, len(prefix) + 1)):  # past the prefix every item is `items`
        if _never(_at(out, i)):
            return Empty(f"item {i} is required (minItems {lo}) but no value is allowed there")
    return out


def _at(a: Arr, i: int) -> Sub:
    return a.prefix[i] if i < len(a.prefix) else a.items


def _objects(a: Obj, b: Obj, norm: Normalizer) -> Obj | Empty:
    names = [k for k, _ in a.props] + [k for k, _ in b.props if a.declared(k) is None]
    props = tuple((k, norm.value_sub(a, k) | norm.value_sub(b, k)) for k in names)
    lo = max(a.min_props, b.min_props)
    his = [h for h in (a.max_props, b.max_props) if h is not None]
    hi = min(his) if his else None
    order = a.required_order + tuple(r for r in b.required_order if r not in a.required_order)
    out = Obj(props, a.required | b.required, a.pattern_props + b.pattern_props,
              a.additional + b.additional, a.names | b.names, lo, hi, a.where or b.where,
              order, a.unevaluated + b.unevaluated, a.evaluated_names | b.evaluated_names,
              a.evaluated_patterns | b.evaluated_patterns, a.evaluates_all or b.evaluates_all,
              _regions(a.some_members, b.some_members),
              _regions(a.every_member, b.every_member))
    return object_empty(out, norm)


def _regions(a: tuple[KeyRegion, ...], b: tuple[KeyRegion, ...]) -> tuple[KeyRegion, ...]:
    """The key regions of both (equal ones from different places once)."""
    return a + tuple(r for r in b if not any(replace(r, where="") == replace(q, where="")
                                             for q in a))


def object_empty(o: Obj, norm: Normalizer) -> Obj | Empty:
    """``o``, or :class:`Empty` if its required properties or counts cannot hold."""
    if o.max_props is not None and o.min_props > o.max_props:
        return Empty(f"minProperties {o.min_props} > maxProperties {o.max_props}")
    if o.max_props is not None and len(o.required) > o.max_props:
        return Empty(f"{len(o.required)} required properties > maxProperties {o.max_props}")
    for name in sorted(o.required):
        sub = norm.value_sub(o, name)
        if _never(sub) or contradicts(sub):
            return Empty(f"property {name!r} is required but not allowed")
    return o


def contradicts(sub: Sub) -> bool:
    """Whether ``sub`` asks for a part (or all parts of a negated set) and its negation."""
    for part, negated in sub:
        if negated and ((part, False) in sub or (
                isinstance(part, frozenset) and part and part <= sub)):
            return True
    return False


def _never(sub: Sub) -> bool:
    return (FALSE_NID, False) in sub


def with_required(o: Obj, names: frozenset[str], norm: Normalizer) -> Obj | Empty:
    """``o`` with ``names`` required too."""
    return object_empty(replace(o, required=o.required | names), norm)
