"""`closed_schema`: the same schema with no room for undeclared object properties.

Generation uses it to keep a model from rambling (SPEC §5, ``extra_properties``): the
masks follow the spec (an object whose schema does not forbid extra properties accepts
them), but ``"forbid"`` compiles the closed schema instead and ``"avoid"`` uses it as a
soft preference. Every object schema that declares ``properties`` and says nothing about
other properties (no ``additionalProperties``, ``patternProperties`` or
``unevaluatedProperties``) gets ``additionalProperties: false``. Branches of ``allOf``
are left alone: closing each branch of a conjunction would forbid the other branches'
properties.
"""

from __future__ import annotations

from typing import Any

_OPEN_ENDED = ("additionalProperties", "patternProperties", "unevaluatedProperties")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalItems", "contains", "then", "else", "if", "not")


def closed_schema(schema: Any) -> Any:
    """A copy of ``schema`` with undeclared properties forbidden (module docstring)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if isinstance(out.get("properties"), dict) and not any(k in out for k in _OPEN_ENDED):
        out["additionalProperties"] = False
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: closed_schema(sub) for name, sub in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [closed_schema(sub) for sub in out[key]]
    for key in _SCHEMA_VALUES:
        if key in out:
            value = out[key]
            out[key] = ([closed_schema(s) for s in value] if isinstance(value, list)
                        else closed_schema(value))
    return out
