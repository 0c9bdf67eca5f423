"""`closed_schema`: the same schema with no room for undeclared object properties.

Generation uses it to keep a model from rambling (SPEC §5; the policy of
:mod:`tether.session.policy`): the masks follow the spec (an object whose schema does not
forbid extra properties accepts them), but a run compiles the closed schema. Every object
schema that declares ``properties`` and says nothing about other properties (no
``additionalProperties``, ``patternProperties`` or ``unevaluatedProperties``) gets
``additionalProperties: false``.

The closed schema only narrows (every instance of it is an instance of the original) and
keeps satisfiable objects satisfiable: the names such an object may hold are its
declared properties, those that subschemas applied to the same instance declare
(``allOf``/``anyOf``/``oneOf`` branches, ``then``/``else``, ``dependentSchemas``), and the
names ``required`` or ``dependentRequired`` ask for; those not declared at the top are
added with any value. Subschemas applied to the same instance as a closed object are not
closed themselves (closing a branch would forbid the others' properties); ``not`` and
``if`` are never touched (narrowing them would widen what the schema admits).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_OPEN_ENDED = ("additionalProperties", "patternProperties", "unevaluatedProperties")
_DEFINITIONS = ("$defs", "definitions")
_SAME_INSTANCE_LISTS = ("allOf", "anyOf", "oneOf")
_SAME_INSTANCE_VALUES = ("then", "else")
_OTHER_INSTANCES = ("items", "additionalItems", "contains", "additionalProperties")


def closed_schema(schema: Any) -> Any:
    """A copy of ``schema`` with undeclared properties forbidden (module docstring)."""
    return narrowed(schema, _close)


def _close(node: dict[str, Any], enclosed: bool) -> bool:
    """Close ``node`` if it is an object schema to close; whether it was closed."""
    if enclosed or not isinstance(node.get("properties"), dict) or \
            any(k in node for k in _OPEN_ENDED):
        return False
    node["properties"] = _with_named(node)
    node["additionalProperties"] = False
    return True


Edit = Callable[[dict[str, Any], bool], bool]


def narrowed(schema: Any, edit: Edit, *, enclosed: bool = False) -> Any:
    """A copy of ``schema`` with ``edit`` applied to every subschema where narrowing
    narrows the whole (not under ``not`` or ``if``), outermost first. ``edit(node,
    enclosed)`` changes ``node`` (a copy) in place and says whether it closed an object:
    then the subschemas applied to the same instance are ``enclosed``."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    closing = edit(out, enclosed)
    # The same instance: closed here means the branches are enclosed; allOf and
    # dependentSchemas are conjunctions, enclosed either way.
    for key in _SAME_INSTANCE_LISTS:
        if isinstance(out.get(key), list):
            inner = closing or enclosed or key == "allOf"
            out[key] = [narrowed(sub, edit, enclosed=inner) for sub in out[key]]
    for key in _SAME_INSTANCE_VALUES:
        if key in out:
            out[key] = narrowed(out[key], edit, enclosed=closing or enclosed)
    if isinstance(out.get("dependentSchemas"), dict):
        out["dependentSchemas"] = {name: narrowed(sub, edit, enclosed=True)
                                   for name, sub in out["dependentSchemas"].items()}
    # Other instances (property values, items) and definitions start afresh.
    for key in ("properties", *_DEFINITIONS):
        if isinstance(out.get(key), dict):
            out[key] = {name: narrowed(sub, edit) for name, sub in out[key].items()}
    if isinstance(out.get("prefixItems"), list):
        out["prefixItems"] = [narrowed(sub, edit) for sub in out["prefixItems"]]
    for key in _OTHER_INSTANCES:
        if isinstance(out.get(key), dict):
            out[key] = narrowed(out[key], edit)
        elif key == "items" and isinstance(out.get(key), list):
            out[key] = [narrowed(sub, edit) for sub in out[key]]
    return out


def _declared_here(schema: dict[str, Any], names: list[str]) -> None:
    """Append the property names ``schema`` and its same-instance subschemas declare."""
    if isinstance(schema.get("properties"), dict):
        names.extend(schema["properties"])
    for key in _SAME_INSTANCE_LISTS:
        for sub in schema.get(key) or ():
            if isinstance(sub, dict):
                _declared_here(sub, names)
    for key in _SAME_INSTANCE_VALUES:
        if isinstance(schema.get(key), dict):
            _declared_here(schema[key], names)
    for sub in (schema.get("dependentSchemas") or {}).values() \
            if isinstance(schema.get("dependentSchemas"), dict) else ():
        if isinstance(sub, dict):
            _declared_here(sub, names)
    required = schema.get("required")
    if isinstance(required, list):
        names.extend(n for n in required if isinstance(n, str))


def _with_named(schema: dict[str, Any]) -> dict[str, Any]:
    """The declared properties plus, allowing any value, the names the object may hold
    without declaring them at the top (module docstring): declared or required by a
    same-instance subschema, or asked for by ``dependentRequired`` (or array-valued
    ``dependencies``) once a name that may appear is there."""
    properties = dict(schema["properties"])
    needed: list[str] = []
    _declared_here(schema, needed)
    dependents: dict[str, list[str]] = {}
    for key in ("dependentRequired", "dependencies"):
        if isinstance(schema.get(key), dict):
            for name, names in schema[key].items():
                if isinstance(names, list):
                    dependents.setdefault(name, []).extend(
                        n for n in names if isinstance(n, str))
    present = [*properties, *needed]
    seen = set(present)
    for name in present:  # grows while dependencies name more
        for extra in dependents.get(name, ()):
            if extra not in seen:
                seen.add(extra)
                present.append(extra)
    for name in present:
        properties.setdefault(name, {})
    return properties
