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

from typing import Any

_OPEN_ENDED = ("additionalProperties", "patternProperties", "unevaluatedProperties")
_DEFINITIONS = ("$defs", "definitions")
_SAME_INSTANCE_LISTS = ("allOf", "anyOf", "oneOf")
_SAME_INSTANCE_VALUES = ("then", "else")
_OTHER_INSTANCES = ("items", "additionalItems", "contains", "additionalProperties")


def closed_schema(schema: Any, *, enclosed: bool = False) -> Any:
    """A copy of ``schema`` with undeclared properties forbidden (module docstring).
    ``enclosed``: an object schema at the same instance is closed already."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    closing = (not enclosed and isinstance(out.get("properties"), dict)
               and not any(k in out for k in _OPEN_ENDED))
    if closing:
        out["properties"] = _with_named(out)
        out["additionalProperties"] = False
    # The same instance: closed here means the branches are enclosed; allOf and
    # dependentSchemas are conjunctions, enclosed either way.
    for key in _SAME_INSTANCE_LISTS:
        if isinstance(out.get(key), list):
            inner = closing or enclosed or key == "allOf"
            out[key] = [closed_schema(sub, enclosed=inner) for sub in out[key]]
    for key in _SAME_INSTANCE_VALUES:
        if key in out:
            out[key] = closed_schema(out[key], enclosed=closing or enclosed)
    if isinstance(out.get("dependentSchemas"), dict):
        out["dependentSchemas"] = {name: closed_schema(sub, enclosed=True)
                                   for name, sub in out["dependentSchemas"].items()}
    # Other instances (property values, items) and definitions are closed afresh.
    for key in ("properties", *_DEFINITIONS):
        if isinstance(out.get(key), dict):
            out[key] = {name: closed_schema(sub) for name, sub in out[key].items()}
    if isinstance(out.get("prefixItems"), list):
        out["prefixItems"] = [closed_schema(sub) for sub in out["prefixItems"]]
    for key in _OTHER_INSTANCES:
        if isinstance(out.get(key), dict):
            out[key] = closed_schema(out[key])
        elif key == "items" and isinstance(out.get(key), list):
            out[key] = [closed_schema(sub) for sub in out[key]]
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
