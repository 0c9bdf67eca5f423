"""The normal form a schema compiles through: a union of per-type *shapes*.

A schema position means "the JSON values in one of these shapes". Each shape is of one
JSON kind (null, boolean, number, string, array, object) and holds that kind's
constraints in a form the compiler can intersect, complement and emit. The values a
shape allows inside it (property values, array items) are :data:`Sub` — a conjunction
of schema nodes, some negated — which are normalized lazily, so recursive schemas stay
finite.

:class:`Lit` is a finite set of values (``enum``/``const``); :class:`Refused` stands
for a part that cannot be compiled exactly (a ``not`` whose complement is not regular,
say): it disappears when intersected with another kind and is an error if emitted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

# A subschema: (part, negated) pairs, all of which a value must satisfy; a part is a node
# id or, for the negation of a conjunction, a Sub itself.
Sub = frozenset[tuple["str | Sub", bool]]
ANY: Sub = frozenset()
FALSE_NID = "!false"  # the node id of the schema ``false``
NEVER: Sub = frozenset({(FALSE_NID, False)})
# Node ids of the schema ``{"const": value}`` for a value no node of the document holds
# (an item or a property of an enum/const value): the prefix, then the value's JSON text.
CONST_NID = "!const:"

KINDS = ("null", "boolean", "number", "string", "array", "object")


@dataclass(frozen=True)
class Null:
    kind = "null"


@dataclass(frozen=True)
class Bool:
    values: frozenset[bool] = frozenset({False, True})
    kind = "boolean"


@dataclass(frozen=True)
class Num:
    integer: bool = False
    lo: Decimal | None = None
    lo_excl: bool = False
    hi: Decimal | None = None
    hi_excl: bool = False
    multiples: frozenset[Decimal] = frozenset()
    where: str = ""  # where multipleOf was given, for errors
    # Not an integer (the complement of ``type: integer``): spelled as plain decimals
    # with a non-zero fraction digit (``1.5``; not ``15e-1``: rejected, never wrongly
    # accepted).
    fractional: bool = False
    # Not a multiple of any of these (the complement of ``multipleOf``).
    non_multiples: frozenset[Decimal] = frozenset()
    kind = "number"


@dataclass(frozen=True)
class Str:
    min_len: int = 0
    max_len: int | None = None
    patterns: frozenset[str] = frozenset()
    excluded_patterns: frozenset[str] = frozenset()
    excluded_values: frozenset[str] = frozenset()
    formats: frozenset[str] = frozenset()
    where: str = ""
    excluded_formats: frozenset[str] = frozenset()  # (the complement of ``format``)
    kind = "string"


@dataclass(frozen=True)
class Contains:
    sub: Sub
    min: int
    max: int | None
    where: str


@dataclass(frozen=True)
class KeyRegion:
    """The keys that are none of ``excluded`` (the properties a negated schema declares),
    match every pattern of ``inside`` and none of ``outside`` and satisfy ``names``, with
    a subschema ``sub`` for their values. An object's ``some_members`` each ask for at
    least one member in the region whose value is in ``sub`` (what breaking
    ``additionalProperties``/``patternProperties``/``propertyNames`` means: an object's
    ``contains``); its ``every_member`` ask that each member in the region have its
    value in ``sub`` (what breaking such a constraint again means)."""

    inside: frozenset[str]
    outside: frozenset[str]
    excluded: frozenset[str]
    sub: Sub
    where: str
    names: Sub = ANY

    def has_key(self, name: str, matches: Callable[[str, str], bool],
                named: Callable[[str, Sub], bool]) -> bool:
        """Whether key ``name`` is in the region (``matches(pattern, name)``,
        ``named(name, names)``)."""
        return (name not in self.excluded and all(matches(p, name) for p in self.inside)
                and not any(matches(p, name) for p in self.outside)
                and (self.names == ANY or named(name, self.names)))


@dataclass(frozen=True)
class Arr:
    prefix: tuple[Sub, ...] = ()
    items: Sub = ANY
    min_items: int = 0
    max_items: int | None = None
    contains: tuple[Contains, ...] = ()
    unique: str | None = None  # where uniqueItems was required
    # The items the shape's annotations mark evaluated, for an enclosing
    # unevaluatedItems: the first `evaluated_prefix`, every one when `evaluates_all`
    # (recorded only in documents that use unevaluated*).
    evaluated_prefix: int = 0
    evaluates_all: bool = False
    kind = "array"


@dataclass(frozen=True)
class Obj:
    props: tuple[tuple[str, Sub], ...] = ()  # declared properties, in schema order
    required: frozenset[str] = frozenset()
    pattern_props: tuple[tuple[str, Sub], ...] = ()
    # (patterns, sub): a key no property declares and matching none of `patterns` has a
    # value in `sub` (one entry per additionalProperties that was intersected).
    additional: tuple[tuple[frozenset[str], Sub], ...] = ()
    names: Sub = ANY  # propertyNames
    min_props: int = 0
    max_props: int | None = None
    where: str = ""
    required_order: tuple[str, ...] = ()  # `required` as the schema lists it
    # (names, patterns, sub): a key not in `names` and matching none of `patterns` has a
    # value in `sub` (one entry per unevaluatedProperties; `names`, `patterns`: what the
    # shape had evaluated there).
    unevaluated: tuple[tuple[frozenset[str], frozenset[str], Sub], ...] = ()
    # The keys the shape's annotations mark evaluated, for an enclosing
    # unevaluatedProperties: declared names, patternProperties patterns, every key when
    # `evaluates_all` (additionalProperties, unevaluatedProperties). Shapes that stand
    # for a `not`, a failed `if` or a split of the dependencies evaluate nothing.
    # Recorded only in documents that use unevaluated* (elsewhere equal shapes stay equal).
    evaluated_names: frozenset[str] = frozenset()
    evaluated_patterns: frozenset[str] = frozenset()
    evaluates_all: bool = False
    some_members: tuple[KeyRegion, ...] = ()  # each must hold (see KeyRegion)
    every_member: tuple[KeyRegion, ...] = ()  # (see KeyRegion)
    kind = "object"

    def declared(self, name: str) -> Sub | None:
        for key, sub in self.props:
            if key == name:
                return sub
        return None


@dataclass(frozen=True)
class Lit:
    """A finite set of values of one kind, as JSON texts (first-seen order, no duplicates)."""

    kind: str
    texts: tuple[str, ...]

    @property
    def values(self) -> list[Any]:
        return [json.loads(t) for t in self.texts]


    @property
    def keys(self) -> frozenset:
        """The :func:`value_key` of every value."""
        return _keys_of(self.texts)


@lru_cache(maxsize=1024)
def _keys_of(texts: tuple[str, ...]) -> frozenset:
    return frozenset(value_key(json.loads(t)) for t in texts)


def lit(values: list[Any]) -> list[Lit]:
    """``values`` as one :class:`Lit` per kind, duplicates (by JSON equality) dropped."""
    by_kind: dict[str, dict[Any, str]] = {}
    for v in values:
        by_kind.setdefault(kind_of(v), {}).setdefault(value_key(v),
                                                      json.dumps(v, ensure_ascii=False))
    return [Lit(k, tuple(texts.values())) for k, texts in by_kind.items()]


@dataclass(frozen=True)
class Refused:
    """A part of a schema of kind ``kind`` that cannot be compiled exactly."""

    kind: str
    message: str
    where: str


Shape = Null | Bool | Num | Str | Arr | Obj | Lit | Refused


@dataclass(frozen=True)
class Union:
    """Values in any of ``shapes``; when empty, ``why`` says why (message, pointer)."""

    shapes: tuple[Shape, ...]
    why: tuple[str, str] | None = field(default=None, compare=False)


def top(kind: str) -> Shape:
    """The unconstrained shape of ``kind``."""
    return {"null": Null, "boolean": Bool, "number": Num, "string": Str,
            "array": Arr, "object": Obj}[kind]()


TOP = Union(tuple(top(k) for k in KINDS))


def kind_of(value: Any) -> str:
    """The JSON kind of a Python value read from JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float | Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def value_key(value: Any) -> Any:
    """A hashable key equal for values JSON Schema deems equal (1 == 1.0, true != 1,
    objects unordered)."""
    kind = kind_of(value)
    if kind == "number":
        return kind, Decimal(str(value))
    if kind == "array":
        return kind, tuple(value_key(v) for v in value)
    if kind == "object":
        return kind, frozenset((k, value_key(v)) for k, v in value.items())
    return kind, value



def const_sub(value: Any) -> Sub:
    """The subschema of the one value ``value`` (see ``CONST_NID``)."""
    return frozenset({(CONST_NID + json.dumps(value, ensure_ascii=False, sort_keys=True),
                       False)})


def negate_sub(sub: Sub) -> Sub:
    """The subschema of the values ``sub`` rejects."""
    if len(sub) == 1:
        ((part, neg),) = sub
        return frozenset({(part, not neg)})
    return frozenset({(sub, True)})
