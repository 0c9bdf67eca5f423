"""Complements of shapes: what ``not``, ``oneOf`` exclusivity and ``if``/``else`` need.

The values a shape rejects are the other kinds, plus the values of its own kind that
break at least one of its constraints; each broken constraint is again a shape
(``minLength: 3`` broken is ``maxLength: 2``, ``required: [a]`` broken is "``a``
absent", ``items: S`` broken is "contains ¬S", ``type: integer`` broken is a number
with a non-zero fraction digit, an array const broken is another length or an item
that differs…). A constraint whose breaking is not a regular language
over JSON text (``uniqueItems``, ``format``…) becomes :class:`Refused`,
an error only if it survives to emission.
"""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from typing import TYPE_CHECKING

from tether.errors import CompileError, LimitExceeded
from tether.schema import formats
from tether.schema.algebra import intersect_unions
from tether.schema.objects import key_regions, region_sub
from tether.schema.shapes import (
    ANY,
    KINDS,
    NEVER,
    TOP,
    Arr,
    Bool,
    Contains,
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
    const_sub,
    negate_sub,
    top,
)

if TYPE_CHECKING:
    from tether.schema.normalize import Normalizer


def complement(u: Union, norm: Normalizer, where: str, keyword: str,
               keys: frozenset[str] | None = None, kinds: tuple[str, ...] = KINDS
               ) -> Union:
    """The values of ``kinds`` not in ``u``; parts that cannot be expressed are
    :class:`Refused`, blamed on ``keyword`` at ``where``. ``keys``, when given, are the
    only property names the objects of interest can have (which makes breaking
    ``additionalProperties`` and ``propertyNames`` expressible: one of those keys is
    present and breaks it)."""
    out = Union(tuple(top(k) for k in kinds)) if kinds != KINDS else TOP
    for shape in u.shapes:
        if shape.kind not in kinds:
            continue
        others = tuple(top(k) for k in kinds if k != shape.kind)
        inside = tuple(_breaks(shape, where, keyword, norm, keys))
        out = intersect_unions(out, Union(others + inside), norm, where)
    if not out.shapes:
        return Union((), (f"'{keyword}' excludes every value", where))
    return out


def _breaks(s: Shape, where: str, keyword: str, norm: Normalizer,
            keys: frozenset[str] | None) -> list[Shape]:
    """The shapes of the values of ``s.kind`` that ``s`` rejects."""
    def refuse(what: str) -> Refused:
        return Refused(s.kind, f"'{keyword}' would need the complement of {what}, "
                               "which cannot be enforced", where)

    if isinstance(s, Null):
        return []
    if isinstance(s, Refused):
        return [s]
    if isinstance(s, Bool):
        rest = frozenset({False, True}) - s.values
        return [Bool(rest)] if rest else []
    if isinstance(s, Lit):
        return _not_literals(s, norm, where)
    if isinstance(s, Num):
        out: list[Shape] = []
        if s.integer:
            out.append(Num(fractional=True))
        if s.fractional:
            out.append(Num(integer=True))
        out += [Num(non_multiples=frozenset({m})) for m in sorted(s.multiples)]
        out += [Num(multiples=frozenset({m})) for m in sorted(s.non_multiples)]
        if s.lo is not None:
            out.append(Num(hi=s.lo, hi_excl=not s.lo_excl))
        if s.hi is not None:
            out.append(Num(lo=s.hi, lo_excl=not s.hi_excl))
        return out
    if isinstance(s, Str):
        out = []
        if s.min_len > 0:
            out.append(Str(max_len=s.min_len - 1))
        if s.max_len is not None:
            out.append(Str(min_len=s.max_len + 1))
        out += [Str(excluded_patterns=frozenset({p})) for p in sorted(s.patterns)]
        out += [Str(patterns=frozenset({p})) for p in sorted(s.excluded_patterns)]
        if s.excluded_values:
            out.append(Lit("string", tuple(json.dumps(v, ensure_ascii=False)
                                           for v in sorted(s.excluded_values))))
        for name in sorted(s.formats):
            try:
                known = formats.format_expr(name) is not None
            except CompileError:
                known = False
            if known:
                out.append(Str(excluded_formats=frozenset({name})))
            elif name in formats.SPEC_FORMATS:
                out.append(refuse(f"format {name!r}"))
            # (a format validators do not know never fails: nothing breaks it)
        out += [Str(formats=frozenset({name})) for name in sorted(s.excluded_formats)]
        return out
    if isinstance(s, Arr):
        return _not_array(s, refuse)
    return _not_object(s, refuse, norm, keys)


def _not_literals(s: Lit, norm: Normalizer, where: str) -> list[Shape]:
    if s.kind == "string":
        return [Str(excluded_values=frozenset(s.values))]
    if s.kind == "boolean":
        rest = frozenset({False, True}) - frozenset(s.values)
        return [Bool(rest)] if rest else []
    if s.kind == "null":
        return []
    if s.kind == "number":
        points = sorted({Decimal(str(v)) for v in s.values})
        out: list[Shape] = [Num(hi=points[0], hi_excl=True)]
        out += [Num(lo=a, lo_excl=True, hi=b, hi_excl=True)
                for a, b in zip(points, points[1:], strict=False)]
        out.append(Num(lo=points[-1], lo_excl=True))
        return out
    # Arrays and objects: the values that differ from every one of them.
    differ = _not_array_value if s.kind == "array" else _not_object_value
    rest = Union(tuple(differ(s.values[0])))
    for value in s.values[1:]:
        rest = intersect_unions(rest, Union(tuple(differ(value))), norm, where)
    return list(rest.shapes)


def _not_array_value(value: list) -> list[Shape]:
    """The arrays other than ``value``: another length, or an item that differs."""
    out: list[Shape] = [Arr(min_items=len(value) + 1)]
    if value:
        out.append(Arr(max_items=len(value) - 1))
    out += [Arr(prefix=(ANY,) * i + (negate_sub(const_sub(item)),), min_items=i + 1)
            for i, item in enumerate(value)]
    return out


def _not_object_value(value: dict) -> list[Shape]:
    """The objects other than ``value``: one of its keys absent, or present with
    another value, or more keys than it has (then one is not among its keys)."""
    out: list[Shape] = [Obj(props=((name, NEVER),)) for name in sorted(value)]
    out += [Obj(props=((name, negate_sub(const_sub(value[name]))),),
                required=frozenset({name})) for name in sorted(value)]
    out.append(Obj(min_props=len(value) + 1))
    return out


def _not_array(s: Arr, refuse) -> list[Shape]:
    out: list[Shape] = []
    if s.min_items > 0:
        out.append(Arr(max_items=s.min_items - 1))
    if s.max_items is not None:
        out.append(Arr(min_items=s.max_items + 1))
    for i, sub in enumerate(s.prefix):
        if sub != ANY:
            out.append(Arr(prefix=(ANY,) * i + (negate_sub(sub),), min_items=i + 1))
    if s.items != ANY:
        if s.prefix:
            out.append(refuse("'items' after 'prefixItems'"))
        else:
            out.append(Arr(contains=(Contains(negate_sub(s.items), 1, None, ""),)))
    for c in s.contains:
        if c.min > 0:
            out.append(Arr(contains=(Contains(c.sub, 0, c.min - 1, c.where),)))
        if c.max is not None:
            out.append(Arr(contains=(Contains(c.sub, c.max + 1, None, c.where),)))
    if s.unique:
        out.append(refuse("'uniqueItems'"))
    return out


def _not_object(s: Obj, refuse, norm: Normalizer, keys: frozenset[str] | None
                ) -> list[Shape]:
    out: list[Shape] = [Obj(props=((name, NEVER),)) for name in sorted(s.required)]
    for name, _ in s.props:
        sub = norm.value_sub(s, name)
        if sub != ANY:
            out.append(Obj(props=((name, negate_sub(sub)),), required=frozenset({name})))
    undeclared = any(sub != ANY for _, sub in s.pattern_props + s.additional) \
        or any(sub != ANY for _, _, sub in s.unevaluated) or bool(s.every_member)
    if keys is not None and (undeclared or s.names != ANY):
        names = norm.of_sub(s.names)
        for key in sorted(keys):
            if s.declared(key) is None:
                sub = norm.value_sub(s, key)
                if sub != ANY:
                    out.append(Obj(props=((key, negate_sub(sub)),), required=frozenset({key})))
            if norm.members.in_union(key, names) is False:
                out.append(Obj(required=frozenset({key})))
    else:
        if any(sub != ANY for _, _, sub in s.unevaluated):
            out.append(refuse("'unevaluatedProperties'"))
        elif undeclared:
            out += _undeclared_broken(s, refuse)
            declared = frozenset(name for name, _ in s.props)
            out += [Obj(some_members=(replace(r, excluded=r.excluded | declared,
                                              sub=_negated(r.sub)),))
                    for r in s.every_member]
        if s.names != ANY:  # some key breaks it
            out.append(Obj(some_members=(KeyRegion(
                frozenset(), frozenset(), frozenset(), ANY, s.where,
                names=negate_sub(s.names)),)))
    for r in s.some_members:  # every member of the region has another value
        if r.sub == ANY and not (r.inside or r.outside or r.excluded):
            out.append(Obj(names=negate_sub(r.names)))  # no key is in the region
        elif r.names != ANY:
            out.append(refuse("'propertyNames' together with patterns"))
        else:
            out.append(Obj(every_member=(replace(r, sub=_negated(r.sub)),)))
    if s.min_props > 0:
        out.append(Obj(max_props=s.min_props - 1))
    if s.max_props is not None:
        out.append(Obj(min_props=s.max_props + 1))
    return out


def _undeclared_broken(s: Obj, refuse) -> list[Shape]:
    """Objects with a key ``s`` declares no property for whose value breaks what
    ``patternProperties``/``additionalProperties`` ask of it: one :class:`KeyRegion` per
    key region (the patterns the key matches) that asks anything."""
    patterns = sorted({p for p, _ in s.pattern_props} | {p for pats, _ in s.additional
                                                          for p in pats})
    try:
        regions = key_regions(patterns, s.where)
    except LimitExceeded as e:
        return [refuse(f"'patternProperties' ({e.message})")]
    declared = frozenset(name for name, _ in s.props)
    out: list[Shape] = []
    for inside in regions:  # (unevaluatedProperties is refused before)
        sub = region_sub(s, inside)
        if sub != ANY:
            out.append(Obj(some_members=(KeyRegion(
                inside, frozenset(patterns) - inside, declared, _negated(sub), s.where),)))
    return out


def _negated(sub: Sub) -> Sub:
    """``negate_sub``, with the negations of ``true`` and ``false`` spelled as such."""
    return NEVER if sub == ANY else ANY if sub == NEVER else negate_sub(sub)
