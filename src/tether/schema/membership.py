"""Deciding facts about single values at compile time.

``enum``/``const`` values are filtered by the constraints next to them, property names
are matched against ``patternProperties``, and ``oneOf`` needs to know when two branches
cannot share a value. Strings are checked with the very automaton that the string's
shape compiles to (so compile-time and generation-time answers agree); the rest with
JSON Schema's rules on Python values.
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from tether.automata.dfa import DEAD, LazyDFA
from tether.automata.nfa import build_nfa
from tether.errors import CompileError
from tether.schema import strings
from tether.schema.algebra import range_empty
from tether.schema.shapes import (
    Arr,
    Bool,
    Lit,
    Null,
    Num,
    Obj,
    Refused,
    Shape,
    Str,
    Sub,
    Union,
    kind_of,
    value_key,
)

if TYPE_CHECKING:
    from tether.schema.normalize import Normalizer

PROOF_DEPTH = 3  # how deep `provably_empty` looks into properties and items


class Membership:
    """Membership and emptiness questions for one :class:`Normalizer`."""

    def __init__(self, norm: Normalizer) -> None:
        self.norm = norm
        self._dfas: dict[tuple, LazyDFA] = {}

    def satisfies(self, value: Any, shape: Shape) -> bool | Refused:
        """Whether ``value`` (of ``shape.kind``) is in ``shape``; a :class:`Refused`
        shape when that depends on a part that cannot be decided."""
        if isinstance(shape, Refused):
            return shape
        if isinstance(shape, Lit):
            return value_key(value) in shape.keys
        if isinstance(shape, Null):
            return True
        if isinstance(shape, Bool):
            return value in shape.values
        if isinstance(shape, Num):
            return _number_in(Decimal(str(value)), shape)
        if isinstance(shape, Str):
            return self._string_in(value, shape)
        if isinstance(shape, Arr):
            return self._array_in(value, shape)
        return self._object_in(value, shape)

    def in_union(self, value: Any, u: Union) -> bool | Refused:
        """Whether ``value`` is in one of the shapes of ``u``."""
        undecided: Refused | None = None
        kind = kind_of(value)
        for shape in u.shapes:
            if shape.kind != kind:
                continue
            verdict = self.satisfies(value, shape)
            if verdict is True:
                return True
            if isinstance(verdict, Refused):
                undecided = undecided or verdict
        return undecided or False

    def matches(self, pattern: str, name: str) -> bool:
        """Whether the string ``name`` matches the JSON Schema ``pattern`` (a search)."""
        return self._string_in(name, Str(patterns=frozenset({pattern}))) is True

    def has_name(self, name: str, names: Sub) -> bool:
        """Whether key ``name`` satisfies ``names`` (undecided: raises, naming where)."""
        verdict = self.in_union(name, self.norm.of_sub(names))
        if isinstance(verdict, Refused):
            raise CompileError(verdict.message, location=verdict.where)
        return verdict

    def provably_empty(self, shape: Shape, depth: int = PROOF_DEPTH) -> bool:
        """True when ``shape`` allows no value (False: not shown)."""
        if isinstance(shape, Num):
            return range_empty(shape)
        if depth == 0 or not isinstance(shape, Obj | Arr):
            return False
        if isinstance(shape, Obj):
            subs = [self.norm.value_sub(shape, name) for name in sorted(shape.required)]
        else:
            subs = [shape.prefix[i] if i < len(shape.prefix) else shape.items
                    for i in range(shape.min_items)]
        for sub in subs:
            try:
                u = self.norm.of_sub(sub)
            except CompileError:  # a recursive schema met again: not decided here
                continue
            if all(self.provably_empty(s, depth - 1) for s in u.shapes):
                return True
        return False

    # -- per kind ----------------------------------------------------------------------
    def _string_in(self, value: str, shape: Str) -> bool:
        if not (shape.patterns or shape.excluded_patterns or shape.formats
                or shape.excluded_formats  # lengths and values alone: no automaton
                or (shape.max_len is not None and shape.max_len < shape.min_len)):
            return (shape.min_len <= len(value)
                    and (shape.max_len is None or len(value) <= shape.max_len)
                    and value not in shape.excluded_values)
        text = json.dumps(value, ensure_ascii=False).encode()
        for fmt in sorted(shape.formats) or [None]:
            key = (shape.min_len, shape.max_len, tuple(sorted(shape.patterns)),
                   tuple(sorted(shape.excluded_patterns)), tuple(sorted(shape.excluded_values)),
                   fmt, tuple(sorted(shape.excluded_formats)))
            dfa = self._dfas.get(key)
            if dfa is None:
                node = strings.json_string(
                    min_length=shape.min_len, max_length=shape.max_len, patterns=key[2],
                    excluded_patterns=key[3], excluded_values=key[4], format=fmt,
                    excluded_formats=key[6], location=shape.where)
                dfa = self._dfas[key] = LazyDFA(build_nfa(node))
            state = dfa.walk(dfa.start, text)
            if state == DEAD or not dfa.accepting[state]:
                return False
        return True

    def _array_in(self, value: list, shape: Arr) -> bool | Refused:
        n = len(value)
        if n < shape.min_items or (shape.max_items is not None and n > shape.max_items):
            return False
        undecided: Refused | None = None
        for i, item in enumerate(value):
            sub = shape.prefix[i] if i < len(shape.prefix) else shape.items
            verdict = self.in_union(item, self.norm.of_sub(sub))
            if verdict is False:
                return False
            undecided = undecided or (verdict if isinstance(verdict, Refused) else None)
        for c in shape.contains:
            hits = [self.in_union(item, self.norm.of_sub(c.sub)) for item in value]
            if any(isinstance(h, Refused) for h in hits):
                undecided = undecided or next(h for h in hits if isinstance(h, Refused))
                continue
            count = sum(1 for h in hits if h is True)
            if count < c.min or (c.max is not None and count > c.max):
                return False
        if shape.unique and len({value_key(v) for v in value}) < len(value):
            return False
        return undecided or True

    def _object_in(self, value: dict, shape: Obj) -> bool | Refused:
        n = len(value)
        if n < shape.min_props or (shape.max_props is not None and n > shape.max_props):
            return False
        if not shape.required <= value.keys():
            return False
        undecided: Refused | None = None
        names = self.norm.of_sub(shape.names)
        for key, item in value.items():
            for verdict in (self.in_union(key, names),
                            self.in_union(item, self.norm.of_sub(self.norm.value_sub(shape, key)))):
                if verdict is False:
                    return False
                undecided = undecided or (verdict if isinstance(verdict, Refused) else None)
        for some in shape.some_members:
            hits = [self.in_union(item, self.norm.of_sub(some.sub))
                    for key, item in value.items()
                    if some.has_key(key, self.matches, self.has_name)]
            if True not in hits:
                refused = next((h for h in hits if isinstance(h, Refused)), None)
                if refused is None:
                    return False
                undecided = undecided or refused
        return undecided or True


def _number_in(x: Decimal, n: Num) -> bool:
    if n.integer and x != x.to_integral_value():
        return False
    if n.fractional and x == x.to_integral_value():
        return False
    if n.lo is not None and (x < n.lo or (n.lo_excl and x == n.lo)):
        return False
    if n.hi is not None and (x > n.hi or (n.hi_excl and x == n.hi)):
        return False
    return all(_is_multiple(x, m) for m in n.multiples) and \
        not any(_is_multiple(x, m) for m in n.non_multiples)


def _is_multiple(x: Decimal, m: Decimal) -> bool:
    """Exactly, whatever the magnitudes (``Decimal``'s ``%`` fails past its precision)."""
    return (Fraction(x) / Fraction(m)).denominator == 1
