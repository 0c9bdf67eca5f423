"""Object shapes → JSON object text.

Declared properties come in any order, each at most once (``property_order="any"``, the
default: JSON gives member order no meaning) — or, with ``property_order="schema"``, in
schema order or with the required ones first, in the order ``required`` lists them, as
many serializers write them. Required ones must appear, optional ones may be skipped.
Properties the schema does not declare (where ``additionalProperties`` /
``patternProperties`` allow them) may appear before, between and after the declared
ones. Their keys are split into regions by the patterns they match, so each key's value
follows exactly the subschemas that apply to it.

In any order, the members form an :class:`~tether.grammar.ir.AnyOrder` group, which the
pushdown engine builds lazily, one rule per set of members written so far that the text
actually reaches — never the orders or the subsets themselves — and which also counts
members for ``minProperties``/``maxProperties``. In schema order, commas are exact with
no blow-up: the members are built left to right, keeping "some member written so far"
(``G``) apart from "nothing written yet" — ``G_k = G_{k-1} (, M_k)? | M_k`` — so each
member appears at most twice, whatever the number of optional ones (the 2^n trap of
SPEC §13).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from itertools import product
from typing import TYPE_CHECKING

from tether.automata.regex_ast import Repeat, literal
from tether.errors import CompileError, LimitExceeded
from tether.grammar.ir import AnyOrder, Expr
from tether.grammar.lower import any_order_derives
from tether.schema.json_text import alternate, concat
from tether.schema.pointers import join
from tether.schema.shapes import ANY, FALSE_NID, KeyRegion, Lit, Obj, Refused, Str, Sub
from tether.schema.strings import NO_STRING, json_string

if TYPE_CHECKING:
    from tether.schema.emit import Emitter

MAX_PATTERN_REGIONS = 64  # key regions from patternProperties (sets of patterns)
MAX_SOME_MEMBER_FORMS = 16  # ways an object may satisfy its KeyRegion constraints

# A slot: (member, kind) with kind "required", "optional" or "many" (undeclared keys).
Slot = tuple[Expr, str]


def emit_object(o: Obj, em: Emitter) -> Expr | None:
    """The object text of ``o``; None when no object fits it."""
    if o.every_member:
        o = _excluded_declared(o, em)
    if o.some_members:
        return _with_some_members(o, em)
    return _emit(o, em, ())


def _with_some_members(o: Obj, em: Emitter) -> Expr | None:
    """The object text of ``o``, whose :class:`KeyRegion` constraints each hold by one
    of its named members (``properties`` or ``required``: that member is then required
    and its value in the constraint's subschema too) or by a member whose key names
    neither — one such member may hold several of them: one object form per way of
    choosing."""
    norm = em.norm
    names = _named(o)
    closed = not o.pattern_props and any(not pats and _never(sub) for pats, sub in o.additional)
    choices = []
    for some in o.some_members:
        in_region = [n for n in names
                     if some.has_key(n, norm.members.matches, norm.members.has_name)]
        if some.sub == ANY:  # only a key is asked for
            if o.required & set(in_region):
                continue  # a required key is one
            if closed and len(in_region) == len(names):  # every key is one
                o = replace(o, min_props=max(o.min_props, 1))
                continue
        choices.append((some, [None, *in_region]))
    if not choices:
        return _emit(replace(o, some_members=()), em, ())
    forms: list[Expr] = []
    n_forms = 0
    for picked in product(*(c for _, c in choices)):
        subs = {n: norm.value_sub(o, n) for n in picked if n is not None}
        for (some, _), name in zip(choices, picked, strict=True):
            if name is not None:
                subs[name] |= some.sub
        props = tuple((n, subs.pop(n, sub)) for n, sub in o.props) + tuple(subs.items())
        plain = replace(o, props=props, some_members=(),
                        required=o.required | {n for n in picked if n is not None})
        own = [some for (some, _), name in zip(choices, picked, strict=True)
               if name is None]
        for groups in _partitions(own):
            n_forms += 1
            if n_forms > MAX_SOME_MEMBER_FORMS:
                raise LimitExceeded(f"more than {MAX_SOME_MEMBER_FORMS} ways for an object to "
                                    "have the members 'not'/'oneOf' ask for", location=o.where)
            form = _emit(plain, em, tuple(_together(g) for g in groups))
            if form is not None:
                forms.append(form)
    return alternate(forms) if forms else em.empty(
        "no object has the members 'not'/'oneOf' ask for", o.where)


def _excluded_declared(o: Obj, em: Emitter) -> Obj:
    """``o`` with the keys its ``every_member`` regions leave out declared (optional,
    their values as before): then whether a key ``o`` does not declare is in a region
    is a matter of patterns alone."""
    names = sorted({e for r in o.every_member for e in r.excluded}
                   - {name for name, _ in o.props})
    if not names:
        return o
    return replace(o, props=o.props + tuple((e, em.norm.value_sub(o, e)) for e in names))


def _partitions(items: list[KeyRegion]) -> Iterator[list[list[KeyRegion]]]:
    """Every way to split ``items`` into non-empty groups (the members they ask for,
    one per group)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for groups in _partitions(rest):
        yield [[first], *groups]
        for i in range(len(groups)):
            yield [*groups[:i], [first, *groups[i]], *groups[i + 1:]]


def _together(group: list[KeyRegion]) -> KeyRegion:
    """One member that holds every constraint of ``group``."""
    if len(group) == 1:
        return group[0]
    return KeyRegion(frozenset().union(*(s.inside for s in group)),
                     frozenset().union(*(s.outside for s in group)),
                     frozenset().union(*(s.excluded for s in group)),
                     frozenset().union(*(s.sub for s in group)), group[0].where,
                     frozenset().union(*(s.names for s in group)))


def _named(o: Obj) -> list[str]:
    """The keys ``o`` names: its properties, then its other required keys."""
    return [name for name, _ in o.props] + [r for r in sorted(o.required)
                                             if o.declared(r) is None]


def _emit(o: Obj, em: Emitter, own: tuple[KeyRegion, ...]) -> Expr | None:
    """The object text of ``o`` (no KeyRegion) with one member for each of ``own``
    besides, whose key ``o`` does not name."""
    norm = em.norm
    names = norm.of_sub(o.names)
    keys = _named(o)
    declared = [(name, norm.value_sub(o, name)) for name in keys]
    members: list[tuple[str, Expr, bool]] = []
    for name, sub in declared:
        required = name in o.required
        named = norm.members.in_union(name, names)
        if isinstance(named, Refused):
            em.shape(named)  # raises: propertyNames cannot be decided for this name
        if _never(sub) or named is False:
            if required:
                return em.empty(f"required property {name!r} is not allowed", o.where)
            continue
        value = em.ref(sub)
        if value is None:
            if required:
                return em.empty(f"required property {name!r} has no valid value", o.where)
            continue
        key = literal(_quoted(name))
        members.append((name, concat(key, em.layout.colon, value), required))
    extra = _extra_member(o, em, {name for name, _ in declared})
    for some in own:
        member = _extra_member(o, em, {name for name, _ in declared}, some)
        if member is None:
            return em.empty("no key outside the properties can hold what 'not'/'oneOf' "
                            "ask for", some.where)
        members.append((f"#{len(members)}", member, True))
    if em.any_order and (len(members) > 1 or o.min_props > 1 or o.max_props is not None):
        return _any_order(members, extra, o, em)
    orders = [members]
    first = sorted(members, key=lambda m: (o.required_order.index(m[0])
                                           if m[0] in o.required_order else len(members)))
    if first != members:
        orders.append(first)
    bodies = []
    empty_ok = False
    for order in orders:
        slots = _slots(order, extra)
        body, may_be_empty = _counted(slots, o, em)
        empty_ok = empty_ok or may_be_empty
        if body is not None:
            bodies.append(body)
    body = alternate(bodies) if bodies else None
    out = em.layout.container("{", body, "}", empty_ok=empty_ok and o.min_props == 0)
    return out if out is not None else em.empty("no object has the required properties",
                                                 o.where)


def _any_order(members: list[tuple[str, Expr, bool]], extra: Expr | None, o: Obj,
               em: Emitter) -> Expr | None:
    """The object text of ``o`` with its members in any order (an AnyOrder group)."""
    n_required = sum(1 for _, _, required in members if required)
    empty_ok = o.min_props == 0 and n_required == 0
    body: Expr | None = None
    if members or extra is not None:
        group = AnyOrder(
            tuple(em.named("member", m, join(o.where, "properties", name)
                           if o.declared(name) is not None else o.where)
                  for name, m, _ in members),
            tuple(required for _, _, required in members), extra, em.layout.comma,
            max(o.min_props, 1), o.max_props, o.where)
        if any_order_derives(group, [True] * len(members), extra is not None):
            body = group
    out = em.layout.container("{", body, "}", empty_ok=empty_ok)
    return out if out is not None else em.empty("no object has the required properties "
                                                "within minProperties/maxProperties", o.where)


def _slots(members: list[tuple[str, Expr, bool]], extra: Expr | None) -> list[Slot]:
    slots: list[Slot] = []
    if extra is not None:
        slots.append((extra, "many"))
    for _, member, required in members:
        slots.append((member, "required" if required else "optional"))
        if extra is not None:
            slots.append((extra, "many"))
    return slots


def _counted(slots: list[Slot], o: Obj, em: Emitter) -> tuple[Expr | None, bool]:
    """The non-empty member sequences of ``slots`` and whether none is allowed,
    honouring min/maxProperties."""
    n_required = sum(1 for _, kind in slots if kind == "required")
    n_bounded = sum(1 for _, kind in slots if kind != "many")
    has_many = any(kind == "many" for _, kind in slots)
    lo, hi = o.min_props, o.max_props
    if lo <= max(n_required, 1) and (hi is None or (not has_many and n_bounded <= hi)):
        body, empty_ok = sequence(slots, em.layout.comma)
        return body, empty_ok and lo == 0
    if len(slots) == 1 and has_many:  # only undeclared keys: count them
        member = slots[0][0]
        if hi == 0:
            return None, True
        body = concat(member, Repeat(concat(em.layout.comma, member), max(lo - 1, 0),
                                     None if hi is None else hi - 1))
        return body, lo == 0
    raise CompileError("minProperties/maxProperties together with optional or undeclared "
                       "properties is not supported", location=o.where)


def sequence(slots: list[Slot], comma: Expr) -> tuple[Expr | None, bool]:
    """Comma-joined members in slot order: (the non-empty sequences, whether the empty
    one is allowed). See the module docstring."""
    g: Expr | None = None
    empty_ok = True
    for member, kind in slots:
        tail = concat(comma, member)
        if kind == "many":
            rest, first = Repeat(tail, 0, None), concat(member, Repeat(tail, 0, None))
        elif kind == "optional":
            rest, first = Repeat(tail, 0, 1), member
        else:
            rest, first = tail, member
        forms = []
        if g is not None:
            forms.append(concat(g, rest))
        if empty_ok:
            forms.append(first)
        g = alternate(forms)
        if kind == "required":
            empty_ok = False
    return g, empty_ok


def _extra_member(o: Obj, em: Emitter, declared: set[str], some: KeyRegion | None = None
                  ) -> Expr | None:
    """A member whose key no property declares, or None if there can be none; with
    ``some``, one that also satisfies ``some`` (its key in the region, its value in the
    subschema)."""
    if any(r.names != ANY for r in o.every_member):  # (negate.py does not make these)
        raise CompileError("a key region with propertyNames is not supported", location=o.where)
    patterns = sorted({p for p, _ in o.pattern_props}
                      | {p for pats, _ in o.additional for p in pats}
                      | {p for _, pats, _ in o.unevaluated for p in pats}
                      | {p for r in o.every_member for p in r.inside | r.outside})
    names = em.norm.of_sub(o.names if some is None else o.names | some.names)
    forms: list[Expr] = []
    for region in key_regions(patterns, o.where):
        inside = set(region)
        sub = region_sub(o, region).union(
            *(r.sub for r in o.every_member if r.inside <= inside and not r.outside & inside))
        outside = set(patterns) - inside
        if some is not None:
            sub |= some.sub
            inside, outside = inside | some.inside, outside | some.outside
            if inside & outside:
                continue
        if _never(sub):
            continue
        keys = _keys(names.shapes, inside, outside,
                     declared | (some.excluded if some else set()), em, o)
        value = em.ref(sub) if keys else None  # (keys first: a region may be empty)
        if value is None:
            continue
        forms += [concat(key, em.layout.colon, value) for key in keys]
    if not forms:
        return None
    em.extra_keys = True
    return em.named("extra" if some is None else "some_member", alternate(forms), o.where)


def region_sub(o: Obj, inside: frozenset[str]) -> Sub:
    """What ``patternProperties``, ``additionalProperties`` and ``unevaluatedProperties``
    ask of the value of a key ``o`` does not declare that matches the patterns
    ``inside`` and no other."""
    return frozenset().union(*(s for p, s in o.pattern_props if p in inside),
                             *(s for pats, s in o.additional if not pats & inside),
                             *(s for _, pats, s in o.unevaluated if not pats & inside))


def key_regions(patterns: list[str], where: str) -> list[frozenset[str]]:
    """The key regions of ``patterns`` (``patternProperties``, ``additionalProperties``):
    the sets of them some key can match together, decided pattern by pattern — a set is
    dropped as soon as no string matches all of its patterns, so patterns that exclude
    one another (``^name$``, ``^title_…$``) give one region each, not every subset."""
    regions: list[frozenset[str]] = [frozenset()]
    for pattern in patterns:
        grown = []
        for region in regions:
            grown.append(region)
            with_it = region | {pattern}
            if len(with_it) == 1 or _matched_together(with_it):
                grown.append(with_it)
        regions = grown
        if len(regions) > MAX_PATTERN_REGIONS:
            raise LimitExceeded(f"more than {MAX_PATTERN_REGIONS} key regions from "
                                "patternProperties", location=where)
    return regions


def _matched_together(patterns: frozenset[str]) -> bool:
    """Whether some string has a match of every pattern of ``patterns``."""
    try:
        json_string(patterns=tuple(sorted(patterns)))
    except CompileError as e:
        if e.message.startswith(NO_STRING):
            return False
        raise
    return True


def _keys(shapes, inside: set[str], outside: set[str], declared: set[str], em: Emitter,
          o: Obj) -> list[Expr]:
    """The key languages of one pattern region, under propertyNames."""
    out: list[Expr] = []
    for shape in shapes:
        if isinstance(shape, Lit) and shape.kind == "string":
            region = Str(patterns=frozenset(inside), excluded_patterns=frozenset(outside))
            out += [literal(_quoted(v)) for v in shape.values
                    if v not in declared and em.norm.members.satisfies(v, region) is True]
        elif isinstance(shape, Str):
            key = em.string(Str(shape.min_len, shape.max_len, shape.patterns | inside,
                                shape.excluded_patterns | outside,
                                shape.excluded_values | declared, shape.formats,
                                shape.where or o.where, shape.excluded_formats))
            if key is not None:
                out.append(key)
        elif shape.kind == "string":
            em.shape(shape)  # a Refused propertyNames: raises
    return out


def _never(sub: Sub) -> bool:
    return (FALSE_NID, False) in sub



def _quoted(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)
