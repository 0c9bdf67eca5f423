"""Schema positions → unions of shapes (:mod:`tether.schema.shapes`).

:class:`Normalizer` reads one schema node at a time: its ``$ref``, its type and
per-kind keywords, ``enum``/``const``, and its combinators — ``allOf`` (intersection),
``anyOf`` (union), ``oneOf`` (each branch minus the others), ``not`` (minus),
``if``/``then``/``else`` (``(if ∧ then) ∨ (¬if ∧ else)``) — where "minus" complements
only the shapes that may overlap (:meth:`Normalizer._minus`), so most real ``oneOf``s,
whose branches differ by kind, ``const`` or required keys, need no complement at all —
and the ``dependencies`` family (each trigger splits an
object into "trigger absent" and "trigger present and its requirement holds").
``unevaluatedProperties``/``unevaluatedItems`` come last: each object or array shape
knows what its annotations evaluated (docs/json-schema.md, "Unevaluated keys and
items"). ``$dynamicRef`` resolves in the dynamic scope, which a node id carries as a
number (:func:`~tether.schema.pointers.scoped`). Results are memoized per node; values
inside arrays and objects stay unexpanded :data:`~tether.schema.shapes.Sub` until the
emitter asks for them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from functools import reduce
from itertools import combinations
from typing import Any

from tether.errors import CompileError, LimitExceeded
from tether.schema import membership
from tether.schema.algebra import (
    Empty,
    contradicts,
    intersect,
    intersect_unions,
    object_empty,
)
from tether.schema.keywords import ENFORCED, UNSUPPORTED, check_keywords, is_trivial
from tether.schema.negate import complement
from tether.schema.pointers import join, scope_of, scoped
from tether.schema.resolve import Node, Resolver
from tether.schema.shapes import (
    ANY,
    CONST_NID,
    FALSE_NID,
    KINDS,
    NEVER,
    TOP,
    Arr,
    Contains,
    Lit,
    Num,
    Obj,
    Refused,
    Shape,
    Str,
    Sub,
    Union,
    lit,
    top,
)

# Keywords that make a subschema a place of its own even beside a lone $ref
_IDENTIFIERS = frozenset({"$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor",
                          "$schema"})
MAX_NODE_DEPTH = 200  # combinators nested at one instance position ($ref chains…)
MAX_BRANCH_SETS = 4  # anyOf branches whose sets are spelled (unevaluatedProperties)
MAX_ENUM_TEXT = 200_000  # bytes of JSON text an enum's values spell, all together
_TYPES = {"null", "boolean", "integer", "number", "string", "array", "object"}

def _check_enum_size(values: list[Any], where: str) -> None:
    """An enum spells each value as a literal (one automaton state per byte): refuse, at
    once, one whose values spell more than :data:`MAX_ENUM_TEXT` bytes."""
    size = 0
    for value in values:
        size += len(json.dumps(value, ensure_ascii=False).encode())
        if size > MAX_ENUM_TEXT:
            raise LimitExceeded(f"the enum's {len(values)} values spell more than "
                                f"{MAX_ENUM_TEXT} bytes of JSON (each byte is an automaton "
                                "state); use a pattern or a smaller enum", location=where)


class Normalizer:
    """Turns schema nodes into unions of shapes (see the module docstring)."""

    def __init__(self, resolver: Resolver, *, strict: bool, formats: bool = True) -> None:
        self.resolver = resolver
        self.strict = strict
        self.formats = formats  # assert ``format`` (else it is an annotation)
        self._nodes: dict[str, Union] = {}
        self._subs: dict[Sub, Union] = {}
        self._negated: dict[Any, Union] = {}
        self._active: list[str] = []
        self.intersections = 0  # shape intersections so far (bounded: algebra.py)
        self.members = membership.Membership(self)
        # Which keys and items annotations evaluated matters only to unevaluated*: only
        # then do shapes record it, and anyOf branches that hold together (evaluating
        # the union) are spelled as sets
        self._annotations = resolver.mentions("unevaluated")
        # Dynamic scopes ($dynamicRef): the resources with dynamic anchors entered on
        # the way to a node, outermost first, numbered (node ids carry the number).
        self._scopes: list[tuple[str, ...]] = [()]
        self._scope_numbers: dict[tuple[str, ...], int] = {(): 0}

    # -- entry points ------------------------------------------------------------------
    def of_sub(self, sub: Sub) -> Union:
        """The union of shapes a subschema allows."""
        hit = self._subs.get(sub)
        if hit is not None:
            return hit
        out = TOP if not contradicts(sub) else Union(
            (), ("a subschema and its negation both apply here", _where(next(iter(sub))[0])))
        # (what the positive parts allow first: a negation is taken within their kinds)
        for part, negated in sorted(sub, key=lambda p: (p[1], repr(p))) if out.shapes else ():
            u = self._of_part(part)
            if negated:
                u = self._complement(part, u, tuple(k for k in KINDS if any(
                    s.kind == k for s in out.shapes)))
            out = intersect_unions(out, u, self, _where(part))
            if not out.shapes:
                break
        self._subs[sub] = out
        return out

    def of_node(self, nid: str) -> Union:
        """The union of shapes the schema node ``nid`` allows."""
        hit = self._nodes.get(nid)
        if hit is not None:
            return hit
        if nid in self._active:
            raise CompileError("the schema refers to itself without reading any input "
                               "(a $ref/allOf/anyOf cycle at one position)", location=nid)
        if len(self._active) >= MAX_NODE_DEPTH:
            raise LimitExceeded(f"more than {MAX_NODE_DEPTH} nested $ref/combinators at one "
                                "position", location=nid)
        number, plain = scope_of(nid)
        node = self.resolver.node(plain)
        scope = self._scopes[number]
        if node.base not in scope and self.resolver.has_dynamic_anchors(node.base):
            # entering a resource with dynamic anchors: the node in the wider scope
            out = self.of_node(scoped(self._scope_number(scope + (node.base,)), plain))
        else:
            self._active.append(nid)
            try:
                out = self._build(replace(node, nid=nid))
            finally:
                self._active.pop()
        self._nodes[nid] = out
        return out

    def _scope_number(self, scope: tuple[str, ...]) -> int:
        number = self._scope_numbers.get(scope)
        if number is None:
            number = self._scope_numbers[scope] = len(self._scopes)
            self._scopes.append(scope)
        return number

    def value_sub(self, obj: Obj, name: str) -> Sub:
        """The subschema the value of property ``name`` must satisfy in ``obj``: its
        ``properties`` entry and every ``patternProperties`` entry whose pattern matches
        the name, all of them; ``additionalProperties`` for a name neither declares."""
        declared = obj.declared(name)
        out: set = set(declared or ())
        for pattern, psub in obj.pattern_props:
            if self.members.matches(pattern, name):
                out |= psub
        if declared is None:
            for patterns, asub in obj.additional:
                if not any(self.members.matches(p, name) for p in patterns):
                    out |= asub
        for names, patterns, usub in obj.unevaluated:
            if name not in names and not any(self.members.matches(p, name) for p in patterns):
                out |= usub
        for region in obj.every_member:
            if region.has_key(name, self.members.matches, self.members.has_name):
                out |= region.sub
        return frozenset(out)

    def satisfies(self, value: Any, shape: Shape) -> bool | Refused:
        return self.members.satisfies(value, shape)

    # -- internals ---------------------------------------------------------------------
    def _of_part(self, part: str | Sub) -> Union:
        if isinstance(part, frozenset):
            return self.of_sub(part)
        if part == FALSE_NID:
            return Union((), ("the schema 'false' allows no value", ""))
        if part.startswith(CONST_NID):
            return Union(tuple(lit([json.loads(part[len(CONST_NID):])])))
        return self.of_node(part)

    def _complement(self, part: str | Sub, u: Union, kinds: tuple[str, ...]) -> Union:
        """The values of ``kinds`` ``part`` (whose shapes are ``u``) rejects."""
        hit = self._negated.get((part, kinds))
        if hit is None:
            hit = self._negated[part, kinds] = complement(u, self, _where(part), "not",
                                                          kinds=kinds)
        return hit

    def _build(self, node: Node) -> Union:
        s = node.schema
        if s is True:
            return TOP
        if s is False:
            return Union((), ("the schema 'false' allows no value", node.nid))
        if not isinstance(s, dict):
            raise CompileError(f"a schema must be an object or a boolean, not "
                               f"{type(s).__name__}", location=node.nid)
        check_keywords(s, node.nid, strict=self.strict)
        where = node.nid
        out = TOP
        number = scope_of(node.nid)[0]
        if "$ref" in s:
            out = self.of_node(scoped(number, self.resolver.resolve(s["$ref"], node).nid))
            if node.draft <= 7:
                return out
        if "$dynamicRef" in s and node.draft >= 2020:
            target = self.resolver.dynamic_target(s["$dynamicRef"], node, self._scopes[number])
            out = self._and(out, self.of_node(scoped(number, target.nid)), where)
        out = self._and(out, self._own(node), where)
        for i, _ in enumerate(_list(s, "allOf", where)):
            out = self._and(out, self.of_node(join(where, "allOf", i)), where)
        if "anyOf" in s:
            out = self._and(out, self._any_of(node, "anyOf"), where)
        if "oneOf" in s:
            out = self._and(out, self._one_of(node), where)
        if "not" in s:
            out = self._minus(out, self.of_node(join(where, "not")), join(where, "not"), "not")
        if "if" in s and node.draft >= 7:  # before draft-07, if/then/else are unknown words
            out = self._if_then_else(node, out)
        out = self._dependencies(node, out)
        if "unevaluatedProperties" in s:
            out = self._unevaluated_properties(node, out)
        if "unevaluatedItems" in s:
            out = self._unevaluated_items(node, out)
        return out

    def _and(self, a: Union, b: Union, where: str) -> Union:
        if not a.shapes:
            return a
        return intersect_unions(a, b, self, where)

    # -- own keywords ------------------------------------------------------------------
    def _own(self, node: Node) -> Union:
        s, where = node.schema, node.nid
        kinds = _types(s, where)
        out = Union(tuple(self._kind(k, node) for k in kinds))
        out = self._and(TOP, out, where)  # checks each shape's own bounds
        if "const" in s:
            out = self._and(out, Union(tuple(lit([s["const"]]))), join(where, "const"))
        if "enum" in s:
            values = s["enum"]
            if not isinstance(values, list):
                raise CompileError("enum must be an array", location=join(where, "enum"))
            if not values:
                return Union((), ("enum is empty", join(where, "enum")))
            _check_enum_size(values, join(where, "enum"))
            out = self._and(out, Union(tuple(lit(values))), join(where, "enum"))
        return out

    def _kind(self, kind: str, node: Node) -> Shape:
        s = node.schema
        if kind in ("integer", "number"):
            return self._number(kind == "integer", node)
        if kind == "string":
            return Str(_count(s, "minLength", node.nid) or 0, _count(s, "maxLength", node.nid),
                       _strings(s, "pattern", node.nid), frozenset(),
                       frozenset(),
                       _strings(s, "format", node.nid) if self.formats else frozenset(),
                       node.nid)
        if kind == "array":
            return self._array(node)
        if kind == "object":
            return self._object(node)
        return top(kind)

    def _number(self, integer: bool, node: Node) -> Num:
        s, where = node.schema, node.nid
        lo, hi = _decimal(s, "minimum", where), _decimal(s, "maximum", where)
        lo_excl = hi_excl = False
        for key, is_lo in (("exclusiveMinimum", True), ("exclusiveMaximum", False)):
            value = s.get(key)
            if value is None:
                continue
            if isinstance(value, bool):  # draft-04 form
                if is_lo:
                    lo_excl = value and lo is not None
                else:
                    hi_excl = value and hi is not None
                continue
            bound = _decimal(s, key, where)
            if is_lo and (lo is None or bound >= lo):
                lo, lo_excl = bound, True
            if not is_lo and (hi is None or bound <= hi):
                hi, hi_excl = bound, True
        multiples = frozenset()
        if "multipleOf" in s:
            m = _decimal(s, "multipleOf", where)
            if m <= 0:
                raise CompileError("multipleOf must be > 0", location=join(where, "multipleOf"))
            multiples = frozenset({m})
        return Num(integer, lo, lo_excl, hi, hi_excl, multiples,
                   join(where, "multipleOf") if multiples else where)

    def _array(self, node: Node) -> Arr:
        s, where = node.schema, node.nid
        prefix: tuple[Sub, ...] = ()
        items = ANY
        if isinstance(s.get("items"), list):  # draft-07 tuple form
            prefix = tuple(self._sub(node, "items", i) for i in range(len(s["items"])))
            if "additionalItems" in s:
                items = self._sub(node, "additionalItems")
        else:
            if "prefixItems" in s:
                prefix = tuple(self._sub(node, "prefixItems", i)
                               for i in range(len(_list(s, "prefixItems", where))))
            if "items" in s:
                items = self._sub(node, "items")
        contains: tuple[Contains, ...] = ()
        if "contains" in s:
            lo = _count(s, "minContains", where)
            hi = _count(s, "maxContains", where)
            contains = (Contains(self._sub(node, "contains"), 1 if lo is None else lo, hi,
                                 join(where, "contains")),)
        unique = s.get("uniqueItems")
        if not isinstance(unique, bool | None):
            raise CompileError("uniqueItems must be a boolean", location=join(where, "uniqueItems"))
        evaluated = (len(prefix), "additionalItems" in s if isinstance(s.get("items"), list)
                     else "items" in s) if self._annotations else (0, False)
        return Arr(prefix, items, _count(s, "minItems", where) or 0, _count(s, "maxItems", where),
                   contains, join(where, "uniqueItems") if unique else None, *evaluated)

    def _object(self, node: Node) -> Obj:
        s, where = node.schema, node.nid
        props = tuple((k, self._sub(node, "properties", k)) for k in _dict(s, "properties", where))
        required = s.get("required", [])
        if isinstance(required, bool):  # draft-03 form: enforced by the parent, not here
            required = []
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise CompileError("required must be an array of strings",
                               location=join(where, "required"))
        patterns = tuple((p, self._sub(node, "patternProperties", p))
                         for p in _dict(s, "patternProperties", where))
        additional: tuple = ()
        if "additionalProperties" in s:
            additional = ((frozenset(p for p, _ in patterns),
                           self._sub(node, "additionalProperties")),)
        names = self._sub(node, "propertyNames") if "propertyNames" in s else ANY
        return Obj(props, frozenset(required), patterns, additional, names,
                   _count(s, "minProperties", where) or 0, _count(s, "maxProperties", where),
                   where, tuple(dict.fromkeys(required)),
                   evaluated_names=frozenset(k for k, _ in props) if self._annotations
                   else frozenset(),
                   evaluated_patterns=frozenset(p for p, _ in patterns) if self._annotations
                   else frozenset(),
                   evaluates_all="additionalProperties" in s and self._annotations)

    def _sub(self, node: Node, *keys: str | int) -> Sub:
        """The subschema at ``node``/``keys`` (``ANY``/``NEVER`` for trivial ones)."""
        value: Any = node.schema
        for k in keys:
            value = value[k] if isinstance(value, list) else value.get(k)
        if is_trivial(value):
            return ANY
        if value is False:
            return NEVER
        nid = join(node.nid, *keys)
        return frozenset({(self._referenced(value, nid) or nid, False)})

    def _referenced(self, value: Any, nid: str) -> str | None:
        """The node a subschema that is nothing but a ``$ref`` stands for (so references
        to one schema are one subschema: a negation meets what it negates, rules are
        shared); None for any other subschema, or a reference that does not resolve
        (its error comes when the node is read)."""
        if not isinstance(value, dict) or not isinstance(value.get("$ref"), str) or any(
                k != "$ref" and (k in ENFORCED or k in UNSUPPORTED or k in _IDENTIFIERS)
                for k in value):
            return None
        number, plain = scope_of(nid)
        try:
            return scoped(number, self.resolver.resolve(value["$ref"],
                                                        self.resolver.node(plain)).nid)
        except CompileError:
            return None

    def _unevaluated_properties(self, node: Node, out: Union) -> Union:
        """Each object shape of ``out`` with the keys its annotations left unevaluated
        held to ``unevaluatedProperties`` (objects spelled by ``enum``/``const`` carry no
        annotations: all their keys are held to it)."""
        where = join(node.nid, "unevaluatedProperties")
        sub = self._sub(node, "unevaluatedProperties")
        shapes: list[Shape] = []
        why = None
        for x in out.shapes:
            if isinstance(x, Obj):
                if not x.evaluates_all and sub != ANY:
                    entry = (x.evaluated_names, x.evaluated_patterns, sub)
                    y = object_empty(replace(x, unevaluated=x.unevaluated + (entry,)), self)
                    if isinstance(y, Empty):
                        why = why or (f"unevaluatedProperties: {y.reason}", where)
                        continue
                    x = y
                x = replace(x, evaluates_all=True)
            elif isinstance(x, Lit) and x.kind == "object" and sub != ANY:
                allowed = self.of_sub(sub)
                kept = [v for v in x.values
                        if all(self.members.in_union(item, allowed) is True
                               for item in v.values())]
                if not kept:
                    continue
                x = Lit("object", tuple(t for t, v in zip(x.texts, x.values, strict=True)
                                        if v in kept))
            shapes.append(x)
        return Union(tuple(shapes), None if shapes else (
            out.why or why or ("unevaluatedProperties allows no value here", where)))

    def _unevaluated_items(self, node: Node, out: Union) -> Union:
        """Each array shape of ``out`` with the items its annotations left unevaluated
        held to ``unevaluatedItems``. Items ``contains`` matched count as unevaluated
        (stricter than the specification: a wrong reject, never a wrong accept), as do
        those of arrays spelled by ``enum``/``const``."""
        where = join(node.nid, "unevaluatedItems")
        sub = self._sub(node, "unevaluatedItems")
        shapes: list[Shape] = []
        for x in out.shapes:
            if isinstance(x, Arr):
                if not x.evaluates_all and sub != ANY:
                    n = x.evaluated_prefix
                    y = intersect(x, Arr(tuple(ANY if i < n else sub
                                               for i in range(max(n, len(x.prefix)))), sub),
                                  self)
                    if isinstance(y, Empty):
                        continue
                    x = y
                x = replace(x, evaluates_all=True)
            elif isinstance(x, Lit) and x.kind == "array" and sub != ANY:
                allowed = self.of_sub(sub)
                texts = tuple(t for t, v in zip(x.texts, x.values, strict=True)
                              if all(self.members.in_union(item, allowed) is True for item in v))
                if not texts:
                    continue
                x = Lit("array", texts)
            shapes.append(x)
        return Union(tuple(shapes), None if shapes else (
            out.why or ("unevaluatedItems allows no value here", where)))

    # -- combinators -------------------------------------------------------------------
    def _any_of(self, node: Node, key: str) -> Union:
        where = join(node.nid, key)
        shapes: list[Shape] = []
        branches = [self.of_node(join(where, i))
                    for i, _ in enumerate(_list(node.schema, key, node.nid))]
        if self._annotations and len(branches) <= MAX_BRANCH_SETS:
            branches += [reduce(lambda a, b: intersect_unions(a, b, self, where), chosen)
                         for n in range(2, len(branches) + 1)
                         for chosen in combinations(branches, n)]
        for u in branches:
            shapes += [x for x in u.shapes if x not in shapes]
        if len(shapes) > 256:
            raise LimitExceeded("anyOf splits into too many alternatives", location=where)
        return Union(tuple(shapes), None if shapes else (f"no branch of {key} allows a value",
                                                         where))

    def _one_of(self, node: Node) -> Union:
        where = join(node.nid, "oneOf")
        branches = [self.of_node(join(where, i))
                    for i, _ in enumerate(_list(node.schema, "oneOf", node.nid))]
        shapes: list[Shape] = []
        for i, u in enumerate(branches):
            for j, other in enumerate(branches):
                if i != j and u.shapes:
                    u = self._minus(u, other, join(where, j), "oneOf")
            shapes += [x for x in u.shapes if x not in shapes]
        return Union(tuple(shapes), None if shapes else ("no branch of oneOf allows a value",
                                                         where))

    def _if_then_else(self, node: Node, out: Union) -> Union:
        where = node.nid
        cond = self.of_node(join(where, "if"))
        then = self.of_node(join(where, "then")) if "then" in node.schema else TOP
        other = self.of_node(join(where, "else")) if "else" in node.schema else TOP
        yes = intersect_unions(intersect_unions(out, cond, self, where), then, self, where)
        no = intersect_unions(self._minus(out, cond, join(where, "if"), "if"), other, self,
                              where)
        shapes = yes.shapes + tuple(x for x in no.shapes if x not in yes.shapes)
        return Union(shapes, None if shapes else (yes.why or no.why
                                                  or ("if/then/else allows no value", where)))

    def _minus(self, u: Union, v: Union, where: str, keyword: str) -> Union:
        """The values of ``u`` that are not in ``v``. Each shape of ``u`` is cut only by
        the shapes of ``v`` it may share a value with, so parts of ``v`` that cannot be
        complemented matter only where they overlap."""
        out: list[Shape] = []
        why = None
        for x in u.shapes:
            overlap = tuple(y for y in v.shapes if y.kind == x.kind and not self._apart(x, y))
            part = Union((x,))
            if overlap:
                cut = complement(Union(overlap), self, where, keyword, _closed_keys(x))
                part = intersect_unions(part, cut, self, where)
            why = why or part.why
            out += [s for s in part.shapes if s not in out]
        return Union(tuple(out), None if out else (why or (f"'{keyword}' excludes every value",
                                                           where)))

    def _apart(self, x: Shape, y: Shape) -> bool:
        """Whether the two shapes provably share no value."""
        z = intersect(x, y, self)
        return isinstance(z, Empty) or self.members.provably_empty(z)

    def _dependencies(self, node: Node, out: Union) -> Union:
        s, where = node.schema, node.nid
        rules: list[tuple[str, list[str], Sub, str]] = []
        for key in ("dependencies", "dependentRequired", "dependentSchemas"):
            for trigger, dep in _dict(s, key, where).items():
                at = join(where, key, trigger)
                if isinstance(dep, list):
                    if not all(isinstance(d, str) for d in dep):
                        raise CompileError(f"{key} must list property names", location=at)
                    rules.append((trigger, dep, ANY, at))
                elif key != "dependentRequired":
                    rules.append((trigger, [], self._sub(node, key, trigger), at))
                else:
                    raise CompileError("dependentRequired must map to arrays", location=at)
        for trigger, names, sub, at in rules:
            if not out.shapes:
                break
            absent = Obj(props=((trigger, NEVER),))
            present = Obj(required=frozenset([trigger, *names]), where=at)
            split = Union(tuple(top(k) for k in ("null", "boolean", "number", "string", "array"))
                          + (absent, present))
            out = intersect_unions(out, split, self, at)
            if sub != ANY:
                cond = Union(tuple(x for x in out.shapes if not _requires(x, trigger)))
                need = intersect_unions(Union(tuple(x for x in out.shapes
                                                    if _requires(x, trigger))),
                                        self.of_sub(sub), self, at)
                out = Union(cond.shapes + need.shapes, out.why or need.why)
        return out


def _closed_keys(shape: Shape) -> frozenset[str] | None:
    """The only keys an object of ``shape`` can have, if it allows no undeclared ones."""
    if not isinstance(shape, Obj) or shape.pattern_props \
            or not any(not pats and sub == NEVER for pats, sub in shape.additional):
        return None
    return frozenset(k for k, sub in shape.props if sub != NEVER) | shape.required


def _requires(shape: Shape, name: str) -> bool:
    return isinstance(shape, Obj) and name in shape.required


def _where(part: str | Sub) -> str:
    if isinstance(part, frozenset):
        return min((_where(p) for p, _ in part), default="")
    return "" if part == FALSE_NID or part.startswith(CONST_NID) else part


def _types(s: dict, where: str) -> list[str]:
    t = s.get("type")
    if t is None:
        kinds = ["null", "boolean", "number", "string", "array", "object"]
    else:
        names = [t] if isinstance(t, str) else t
        if not isinstance(names, list) or not names:
            raise CompileError("type must be a string or a non-empty array",
                               location=join(where, "type"))
        for k, name in enumerate(names):
            if not isinstance(name, str) or name not in _TYPES:
                raise CompileError(f"unknown type {name!r}",
                                   location=join(where, "type") + (f"/{k}" if t is names else ""))
        kinds = list(dict.fromkeys(names))
        if s.get("nullable") is True and "null" not in kinds:
            kinds.append("null")
    if "integer" in kinds and "number" in kinds:
        kinds.remove("integer")
    return kinds


def _list(s: dict, key: str, where: str) -> list:
    value = s.get(key, [])
    if not isinstance(value, list):
        raise CompileError(f"{key} must be an array", location=join(where, key))
    if key in ("allOf", "anyOf", "oneOf") and key in s and not value:
        raise CompileError(f"{key} must not be empty", location=join(where, key))
    return value


def _dict(s: dict, key: str, where: str) -> dict:
    value = s.get(key, {})
    if not isinstance(value, dict):
        raise CompileError(f"{key} must be an object", location=join(where, key))
    return value


def _count(s: dict, key: str, where: str) -> int | None:
    value = s.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 \
            or value != int(value):
        raise CompileError(f"{key} must be a non-negative integer", location=join(where, key))
    return int(value)


def _decimal(s: dict, key: str, where: str) -> Decimal | None:
    value = s.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CompileError(f"{key} must be a number", location=join(where, key))
    try:
        return Decimal(str(value))
    except InvalidOperation:  # pragma: no cover - json gives finite numbers
        raise CompileError(f"{key} must be a finite number", location=join(where, key)) from None


def _strings(s: dict, key: str, where: str) -> frozenset[str]:
    value = s.get(key)
    if value is None:
        return frozenset()
    if not isinstance(value, str):
        raise CompileError(f"{key} must be a string", location=join(where, key))
    return frozenset({value})
