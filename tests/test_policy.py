"""The JSON Schema generation policy (docs/json-schema.md, "Generation policy"): closed
objects in schema order, never an unsatisfiable narrowing, never a widening."""

from __future__ import annotations

import json

import jsonschema
import pytest

import tether
from tether.schema.closed import closed_schema
from tether.session import compile_for_generation, generation_constraint
from tether.vocab import Vocabulary

BYTES = Vocabulary.of_bytes()


def test_objects_that_declare_properties_are_closed_and_in_schema_order() -> None:
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {}}}
    constraint = generation_constraint(tether.JsonSchema(schema))
    assert constraint.property_order == "schema"
    compiled = tether.compile(constraint, BYTES)
    assert compiled.check('{"b": 1, "a": 2}').matches
    assert not compiled.check('{"a": 2, "b": 1}').matches  # schema order
    assert not compiled.check('{"b": 1, "a": 2, "c": 3}').matches  # closed
    assert not compiled.check('{"b": 1, "b": 1, "a": 2}').matches  # each key once
    spec = generation_constraint(tether.JsonSchema(schema), "spec")
    assert tether.compile(spec, BYTES).check('{"a": 2, "c": 3, "c": 1}').matches


def test_names_an_object_must_hold_stay_allowed() -> None:
    schema = {"type": "object", "properties": {"base": {"type": "number"}},
              "required": ["base", "shape"], "dependentRequired": {"base": ["units"]}}
    closed = closed_schema(schema)
    assert list(closed["properties"]) == ["base", "shape", "units"]
    assert closed["additionalProperties"] is False
    compiled = tether.compile(generation_constraint(tether.JsonSchema(schema)), BYTES)
    assert compiled.check('{"base": 1, "shape": 2, "units": 3}').matches


def test_same_instance_branches_are_not_closed() -> None:
    schema = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}},
              "anyOf": [{"properties": {"x": {"type": "integer"}}, "required": ["x"]},
                        {"properties": {"y": {"type": "string"}}, "required": ["y"]}]}
    closed = closed_schema(schema)
    assert set(closed["properties"]) == {"kind", "x", "y"}
    assert all("additionalProperties" not in branch for branch in closed["anyOf"])
    compiled = compile_for_generation(tether.JsonSchema(schema), BYTES)
    assert compiled.check('{"kind": "a", "x": 1}').matches
    assert not compiled.check('{"kind": "a", "z": 1}').matches


@pytest.mark.parametrize("key", ["not", "if"])
def test_not_and_if_are_left_alone(key: str) -> None:
    schema = {key: {"type": "object", "properties": {"a": {}}}}
    assert closed_schema(schema) == schema


def test_closed_instances_are_instances_of_the_original() -> None:
    """Every instance the closed schema accepts, the original accepts (checked on the
    texts a walk through the closed schema's language reaches)."""
    schema = {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "b": {"type": "array", "items": {"type": "object", "properties": {"s": {}}}}},
        "not": {"required": ["c"]}}
    compiled = compile_for_generation(tether.JsonSchema(schema), BYTES)
    for text in ['{"a": {"n": 1}}', '{"b": [{"s": 1}, {}]}', '{}', '{"a": {}, "b": []}']:
        assert compiled.check(text).matches
        jsonschema.validate(json.loads(text), schema)


def test_falls_back_to_the_callers_schema_when_the_closed_one_does_not_compile() -> None:
    """A oneOf whose second branch, closed, leaves the first (open: it has
    patternProperties) more ways to hold "a key the second does not name" than tether
    builds (twenty optional keys, or one of its own)."""
    many = {f"p{i}": {"type": "integer"} for i in range(20)}
    schema = {"type": "object", "properties": {"shape": {"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "a"}, **many},
         "patternProperties": {"^x-": {}}},
        {"type": "object", "properties": {"kind": {"type": "string"}}}]}}}
    with pytest.raises(tether.CompileError):
        tether.compile(generation_constraint(tether.JsonSchema(schema)), BYTES)
    compiled = compile_for_generation(tether.JsonSchema(schema), BYTES)
    assert compiled.constraint.schema == schema
    assert compiled.constraint.property_order == "schema"
    assert compiled.check('{"shape": {"kind": "b"}}').matches


def test_unbounded_integers_are_kept_to_safe_ones() -> None:
    schema = {"type": "object", "properties": {
        "n": {"type": "integer"}, "low": {"type": "integer", "minimum": 5},
        "x": {"type": "number"}}, "not": {"properties": {"n": {"type": "integer"}}}}
    policy = generation_constraint(tether.JsonSchema(schema)).schema
    assert policy["properties"]["n"] == {"type": "integer", "minimum": -(2**53 - 1),
                                         "maximum": 2**53 - 1}
    assert policy["properties"]["low"] == {"type": "integer", "minimum": 5,
                                           "maximum": 2**53 - 1}
    assert policy["properties"]["x"] == {"type": "number"}
    assert policy["not"] == schema["not"]  # never narrowed under not
