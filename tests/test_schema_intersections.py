"""Where two subschemas apply to one value, the value must satisfy both: one schema per
interaction of JSON Schema's keywords, each instance walked byte by byte through the
compiled constraint and compared with the ``jsonschema`` validator (draft 2020-12)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from json_schema_suite import accepts

import tether
from tether.errors import CompileError

VOCAB = tether.Vocabulary.of_bytes()

# (interaction, schema, instances)
CASES = [
    ("a declared property whose name matches a pattern",
     {"type": "object", "properties": {"foo": {"type": "array", "maxItems": 3}},
      "patternProperties": {"f.o": {"minItems": 2}}, "additionalProperties": False},
     [{"foo": [1, 2]}, {"foo": [1]}, {"foo": [1, 2, 3, 4]}, {}, {"fao": [1, 2]},
      {"fao": [1]}, {"bar": 1}]),
    ("a name matching two patterns",
     {"type": "object", "patternProperties": {"^a": {"type": "integer"},
                                              "b$": {"minimum": 10}},
      "additionalProperties": {"type": "string"}},
     [{"ab": 12}, {"ab": 5}, {"ab": 12.5}, {"a": 3}, {"b": 3}, {"b": "x"}, {"c": "x"},
      {"c": 1}]),
    ("additionalProperties only for names nothing else matches",
     {"type": "object", "properties": {"x": {"type": "integer"}},
      "patternProperties": {"^y": {"type": "boolean"}},
      "additionalProperties": {"type": "null"}},
     [{"x": 1}, {"x": None}, {"y1": True}, {"y1": None}, {"z": None}, {"z": 1}]),
    ("$ref with sibling keywords",
     {"$defs": {"small": {"type": "integer", "maximum": 10}},
      "$ref": "#/$defs/small", "minimum": 5},
     [7, 3, 12, 5, 10]),
    ("allOf of two objects",
     {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
                 "required": ["a"]},
                {"type": "object", "properties": {"a": {"minimum": 3}, "b": {"type": "string"}}}]},
     [{"a": 4}, {"a": 1}, {"a": 4, "b": "x"}, {"a": 4, "b": 1}, {"b": "x"}]),
    ("allOf of a declared property and a pattern",
     {"allOf": [{"type": "object", "properties": {"id": {"type": "integer"}}},
                {"type": "object", "patternProperties": {"^i": {"minimum": 100}}}]},
     [{"id": 150}, {"id": 5}, {"ix": 5}, {"ix": 500}, {"other": 1}]),
    ("if/then/else",
     {"type": "object", "properties": {"kind": {"enum": ["n", "s"]}, "v": {}},
      "required": ["kind", "v"],
      "if": {"properties": {"kind": {"const": "n"}}},
      "then": {"properties": {"v": {"type": "integer"}}},
      "else": {"properties": {"v": {"type": "string"}}}},
     [{"kind": "n", "v": 1}, {"kind": "n", "v": "x"}, {"kind": "s", "v": "x"},
      {"kind": "s", "v": 1}]),
    ("dependentSchemas",
     {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}},
      "dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}, "required": ["b"]}}},
     [{"a": 1, "b": "x"}, {"a": 1}, {"a": 1, "b": 2}, {"b": 2}, {}]),
    ("not an integer",
     {"not": {"type": "integer"}, "minimum": 1},
     [1.5, 2, 0.5, "x", 7.25, -1.5]),
    ("oneOf an integer or a number",
     {"oneOf": [{"type": "integer"}, {"type": "number", "maximum": 3}]},
     [1, 2.5, 4.5, 5, "x"]),
    ("items of an array under allOf",
     {"allOf": [{"type": "array", "items": {"type": "integer"}},
                {"type": "array", "items": {"minimum": 0}, "maxItems": 3}]},
     [[1, 2], [1, -2], [1.5], [1, 2, 3, 4], []]),
    ("not an array const (nested values, equal numbers spelled apart)",
     {"not": {"const": [1, "a", {"x": [2]}]}},
     [[1, "a", {"x": [2]}], [1.0, "a", {"x": [2.0]}], [1, "a", {"x": [3]}], [1, "a"],
      [1, "a", {"x": [2]}, 4], [1, "a", {"x": [2], "y": 1}], [], 5]),
    ("not an object enum (keys in any order, extra keys, missing keys)",
     {"not": {"enum": [{"a": 1, "b": [True]}, {"c": None}]}},
     [{"a": 1, "b": [True]}, {"b": [True], "a": 1.0}, {"c": None}, {"c": 0}, {"a": 1},
      {"a": 1, "b": [True], "c": None}, {}, [1], "x"]),
    ("not a multiple (any spelling of the number)",
     {"not": {"multipleOf": 3}, "minimum": 0},
     [0, 1, 3, 4, 9, 1.5, -1, 3.0, 7.25]),
    ("oneOf two multiples: exactly one of them",
     {"oneOf": [{"multipleOf": 2}, {"multipleOf": 3}]},
     [2, 3, 6, 4, 9, 12, 5, 0.5]),
    ("not a multiple of a decimal step, huge values",
     {"allOf": [{"type": "number"}, {"not": {"multipleOf": 0.5}}]},
     [0.5, 0.25, 1, 1.75, 1e308, 3]),
    ("contains with minItems and maxItems",
     {"type": "array", "contains": {"const": 1}, "minItems": 2, "maxItems": 3},
     [[1, 2], [2, 1], [1], [2, 2], [1, 1, 1], [2, 2, 1], [1, 2, 2, 2], []]),
    ("two contains, one of them at most none",
     {"type": "array", "allOf": [{"contains": {"type": "integer"}},
                                 {"not": {"contains": {"type": "string"}}}]},
     [[1], [1, None], ["a", 1], [None], [], [None, 2, 3]]),
    ("contains counted beside another contains and a length",
     {"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 3,
      "allOf": [{"contains": {"type": "null"}}], "maxItems": 4},
     [[1, 2, None], [1, None], [1, 2, 3, 4], [1, 2, 3, None], [None, 1, 2, 3, 4], [1, 2]]),
    ("oneOf an object const or objects with its key",
     {"oneOf": [{"const": {"k": "v"}}, {"type": "object", "required": ["k"]}]},
     [{"k": "v"}, {"k": "w"}, {"k": "v", "z": 1}, {}]),
]


# unevaluatedProperties/unevaluatedItems: which keys and items the adjacent keywords and
# in-place applicators evaluated, each form once; all of these compile.
UNEVALUATED = [
    ("own properties and patterns",
     {"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {}},
      "unevaluatedProperties": False},
     [{"a": 1}, {"x1": 1}, {"b": 1}, {}, {"a": 1, "b": 2}]),
    ("allOf branches' properties",
     {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {}}}],
      "unevaluatedProperties": False},
     [{"a": 1, "b": 2}, {"a": "x"}, {"c": 1}, {"b": 1, "c": 1}]),
    ("anyOf: every branch that holds",
     {"anyOf": [{"properties": {"a": {"const": 1}}, "required": ["a"]},
                {"properties": {"b": {"const": 2}}, "required": ["b"]}],
      "unevaluatedProperties": False},
     [{"a": 1}, {"b": 2}, {"a": 1, "b": 2}, {"a": 1, "b": 3}, {"a": 1, "c": 1}]),
    ("oneOf",
     {"oneOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}],
      "unevaluatedProperties": {"type": "integer"}},
     [{"a": "x"}, {"a": "x", "z": 1}, {"a": "x", "z": "y"}, {"b": "x", "a": 1}]),
    ("if/then/else: if's annotations only when it holds",
     {"if": {"properties": {"kind": {"const": "n"}}, "required": ["kind"]},
      "then": {"properties": {"v": {"type": "integer"}}},
      "else": {"properties": {"w": {}}},
      "unevaluatedProperties": False},
     [{"kind": "n", "v": 1}, {"kind": "n", "w": 1}, {"kind": "s"}, {"w": 1},
      {"kind": "s", "w": 1}]),
    ("not: its annotations are dropped",
     {"properties": {"a": {}}, "not": {"properties": {"b": {"const": 1}}, "required": ["b"]},
      "unevaluatedProperties": False},
     [{"a": 1}, {"b": 2}, {"b": 1}, {}]),
    ("$ref and dependentSchemas",
     {"$defs": {"base": {"properties": {"a": {}}}}, "$ref": "#/$defs/base",
      "dependentSchemas": {"a": {"properties": {"b": {}}}},
      "unevaluatedProperties": False},
     [{"a": 1}, {"a": 1, "b": 1}, {"b": 1}, {"c": 1}]),
    ("additionalProperties in a branch evaluates every key",
     {"allOf": [{"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}],
      "unevaluatedProperties": False},
     [{"a": "x", "b": 1}, {"b": "x"}, {}]),
    ("a nested unevaluatedProperties sees only its own branch",
     {"properties": {"b": {}},
      "allOf": [{"properties": {"a": {}}, "unevaluatedProperties": False}]},
     [{"a": 1}, {"a": 1, "b": 1}, {"b": 1}]),
    ("enum objects carry no annotations",
     {"enum": [{"a": 1}, {"a": "x"}], "unevaluatedProperties": {"type": "integer"}},
     [{"a": 1}, {"a": "x"}]),
    ("unevaluatedItems after prefixItems",
     {"prefixItems": [{"type": "integer"}], "unevaluatedItems": {"type": "string"}},
     [[1], [1, "x"], [1, 2], ["x"], []]),
    ("unevaluatedItems with items in allOf and anyOf",
     {"allOf": [{"prefixItems": [{}, {}]}],
      "anyOf": [{"prefixItems": [{}, {}, {"const": 3}]}, {"items": {"type": "integer"}}],
      "unevaluatedItems": False},
     [[1, 2], [1, 2, 3], [1, 2, 3, 4], ["a", "b", 3], ["a", "b", 4], ["a", "b", 3, "c"]]),
    ("a nested unevaluatedItems",
     {"prefixItems": [{}], "allOf": [{"unevaluatedItems": {"type": "integer"}}]},
     [[1], ["x"], [1, 2], [1, "y"]]),
]


# Breaking additionalProperties/patternProperties/propertyNames/format (under not, and
# oneOf's exclusivity): some key the negated schema does not declare has a value its
# region rejects, some key breaks propertyNames, a string has another shape; and
# breaking that again. All of these compile.
UNDECLARED_BROKEN = [
    ("not additionalProperties false: some key",
     {"type": "object", "properties": {"a": {}}, "not": {"additionalProperties": False}},
     [{}, {"a": 1}, {"b": 1}]),
    ("not patternProperties: a matching key with another value",
     {"type": "object", "not": {"patternProperties": {"^x": {"type": "integer"}}}},
     [{"x1": "s"}, {"x1": 1}, {"y": "s"}, {"x1": 1, "x2": "a"}, {}]),
    ("not additionalProperties beside a declared name",
     {"type": "object", "properties": {"a": {"type": "string"}},
      "not": {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}},
     [{"a": "x", "b": "y"}, {"a": "x", "b": 1}, {"b": [1]}, {"a": "x"}]),
    ("the key that breaks it is one the outer schema declares",
     {"type": "object", "properties": {"k": {"type": "integer"}},
      "not": {"additionalProperties": {"type": "string"}}},
     [{"k": 1}, {"z": "s"}, {"z": 2}, {"k": 1, "z": "s"}, {}]),
    ("oneOf: a pattern-keyed object and an open one",
     {"oneOf": [{"type": "object", "patternProperties": {"^[a-z]+$": {"type": "integer"}},
                 "additionalProperties": False},
                {"type": "object", "properties": {"id": {"type": "integer"}},
                 "required": ["id"]}]},
     [{"id": 1}, {"ab": 1}, {"id": 1, "X": 2}, {"ab": "s"}, {"id": 1, "ab": 2}, {}]),
    ("oneOf over $refs to one definition (a negation meets what it negates)",
     {"$defs": {"n": {"type": "integer"}},
      "oneOf": [{"type": "object", "properties": {"v": {"$ref": "#/$defs/n"}},
                 "additionalProperties": False},
                {"type": "object", "patternProperties": {"^v": {"$ref": "#/$defs/n"}},
                 "additionalProperties": False, "minProperties": 1}]},
     [{"v": 1}, {"vv": 1}, {}, {"v": 1, "vw": 2}, {"w": 1}]),
    ("not propertyNames: some key breaks it",
     {"type": "object", "properties": {"ab": {}}, "not": {"propertyNames": {"maxLength": 2}}},
     [{}, {"ab": 1}, {"abc": 1}, {"ab": 1, "xyz": 2}, {"x": 1, "y": 2}]),
    ("two keys asked for, one key may be both",
     {"type": "object", "not": {"anyOf": [{"propertyNames": {"not": {"enum": ["1", "3"]}}},
                                          {"propertyNames": {"not": {"enum": ["2", "3"]}}},
                                          {"propertyNames": {"not": {"enum": ["1", "3"]}}}]}},
     [{"3": 1}, {"1": 1}, {"1": 1, "2": 1}, {"4": 1, "2": 1}, {"1": 1, "4": 2, "2": 3}]),
    ("not not patternProperties: every matching key's value",
     {"type": "object", "not": {"not": {"patternProperties": {"^x": {"type": "integer"}}}}},
     [{"x1": 1}, {"x1": "a"}, {"y": "a"}, {}, {"x1": 1, "x2": []}]),
    ("not not additionalProperties beside properties",
     {"type": "object", "properties": {"foo": {}},
      "not": {"not": {"properties": {"foo": {"type": "string"}},
                      "additionalProperties": {"type": "integer"}}}},
     [{"foo": "a", "b": 1}, {"foo": 1}, {"b": "x"}, {"foo": "a"}, {"b": 2, "c": 3}]),
    ("not not propertyNames",
     {"type": "object", "not": {"not": {"propertyNames": {"maxLength": 2}}}},
     [{"ab": 1}, {"abc": 1}, {}]),
    ("not propertyNames false: some key",
     {"type": "object", "not": {"propertyNames": False}}, [{}, {"a": 1}]),
    ("not format: a string of another shape",
     {"type": "string", "not": {"format": "date"}},
     ["2020-01-01", "2020-13-01", "x", ""]),
    ("oneOf formats that overlap",
     {"oneOf": [{"type": "string", "format": "ipv4"}, {"type": "string", "format": "email"}]},
     ["1.2.3.4", "a@b.co", "x", "1.2.3.400"]),
    ("not a format validators do not know: never broken",
     {"not": {"type": "string", "format": "non-blank"}}, ["", "x", 1, None]),
]


@pytest.mark.parametrize(("interaction", "schema", "instances"), UNDECLARED_BROKEN,
                         ids=[c[0] for c in UNDECLARED_BROKEN])
def test_undeclared_keys_that_break_the_negated_schema(interaction, schema, instances
                                                      ) -> None:
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    compiled = tether.compile(tether.JsonSchema(schema, whitespace="compact"), VOCAB)
    for instance in instances:
        text = json.dumps(instance, separators=(",", ":"))
        assert _accepts(compiled, text) == validator.is_valid(instance), (interaction, text)


@pytest.mark.parametrize(("interaction", "schema", "instances"), UNEVALUATED,
                         ids=[c[0] for c in UNEVALUATED])
def test_unevaluated_keys_and_items(interaction, schema, instances) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    compiled = tether.compile(tether.JsonSchema(schema, whitespace="compact"), VOCAB)
    for instance in instances:
        text = json.dumps(instance, separators=(",", ":"))
        assert _accepts(compiled, text) == validator.is_valid(instance), (interaction, text)


def _accepts(compiled: tether.Compiled, text: str) -> bool:
    return accepts(compiled, list(text.encode()))  # (byte vocabulary: a byte is a token)


@pytest.mark.parametrize(("interaction", "schema", "instances"), CASES,
                         ids=[c[0] for c in CASES])
def test_every_applicable_subschema_holds(interaction, schema, instances) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    try:
        compiled = tether.compile(tether.JsonSchema(schema, whitespace="compact"), VOCAB)
    except CompileError as e:  # refused, naming where: never a silent accept
        assert e.location is not None or "dependentSchemas" in str(e), e
        return
    for instance in instances:
        text = json.dumps(instance, separators=(",", ":"))
        assert _accepts(compiled, text) == validator.is_valid(instance), (interaction, text)
