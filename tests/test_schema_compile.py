"""The JSON Schema compiler (tether.schema.compile_schema), keyword by keyword.

Every instance's verdict is compared with the ``jsonschema`` validator: the compiled
language must accept exactly the valid instances, serialised as the MaskBench harness
does (``json.dumps(data, ensure_ascii=False)``: separators ``", "`` and ``": "``, keys in
the data's order). Bad schemas must be CompileErrors that name the place.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tether
from tether.automata.dfa import DEAD
from tether.compiler import to_automaton
from tether.errors import CompileError
from tether.schema import compile_schema


def automaton(schema, **options):
    return to_automaton(compile_schema(tether.JsonSchema(schema, **options)))


def accepts(aut, text: str) -> bool:
    state = aut.walk(aut.start, text.encode())
    return state != DEAD and bool(aut.accepting[state])


def viable(aut, text: str) -> bool:
    return aut.walk(aut.start, text.encode()) != DEAD


def reference(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def check_against_jsonschema(schema, instances, **options) -> None:
    aut = automaton(schema, **options)
    ref = reference(schema)
    for data in instances:
        text = json.dumps(data, ensure_ascii=False)
        assert accepts(aut, text) == ref.is_valid(data), (schema, text)


CASES = {
    "type": ({"type": "integer"}, [1, -3, 0, 1.5, "1", None, True, [], {}]),
    "type list": ({"type": ["string", "null"]}, ["a", None, 1, False, []]),
    "number": ({"type": "number"}, [1, 1.5, -2e-05, 1e+20, "1", None]),
    "boolean/null": ({"type": ["boolean", "null"]}, [True, False, None, 0, ""]),
    "enum": ({"enum": ["a", 1, None, [1, 2], {"k": "v"}]},
             ["a", "b", 1, 1.0, None, [1, 2], [2, 1], {"k": "v"}, {"k": "w"}, True]),
    "enum ∩ type": ({"type": "string", "enum": ["a", 1, "b"]}, ["a", "b", 1]),
    "const object": ({"const": {"a": [1, {"b": None}]}},
                     [{"a": [1, {"b": None}]}, {"a": [1]}, {"a": [1, {"b": 0}]}]),
    "properties": ({"type": "object", "properties": {"a": {"type": "integer"},
                                                     "b": {"type": "string"}},
                    "required": ["b"]},
                   [{"a": 1, "b": "x"}, {"b": "x"}, {"a": 1}, {}, {"a": "x", "b": "x"},
                    {"b": "x", "z": [1, {"q": None}]}, {"z": 1, "a": 1, "b": "x"},
                    {"a": 1, "z": True, "b": "x"}]),
    "closed object": ({"type": "object", "properties": {"a": {}, "b": {}},
                       "additionalProperties": False},
                      [{}, {"a": 1}, {"b": 2}, {"a": 1, "b": 2}, {"c": 1}, {"a": 1, "c": 1}]),
    "additionalProperties schema": ({"properties": {"a": {"type": "string"}},
                                     "additionalProperties": {"type": "integer"}},
                                    [{"a": "x", "b": 1}, {"a": "x", "b": "y"}, {"b": 2, "c": 3},
                                     {"a": 1}]),
    "patternProperties": ({"type": "object", "patternProperties": {"^x-": {"type": "integer"},
                                                                  "y$": {"type": "string"}},
                           "additionalProperties": False},
                          [{"x-a": 1}, {"x-a": "s"}, {"ay": "s"}, {"x-y": 1}, {"x-y": "s"},
                           {"b": 1}, {}]),
    "propertyNames": ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$",
                                                           "maxLength": 3}},
                      [{"abc": 1}, {"abcd": 1}, {"A": 1}, {}, {"ab": 1, "cd": [2]}]),
    "min/maxProperties": ({"type": "object", "additionalProperties": {"type": "integer"},
                           "minProperties": 1, "maxProperties": 2},
                          [{}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}]),
    "dependentRequired": ({"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
                           "dependentRequired": {"a": ["b"]}},
                          [{}, {"a": 1}, {"a": 1, "b": 2}, {"b": 2}, {"a": 1, "c": 3}]),
    "dependencies (draft-07)": ({"$schema": "http://json-schema.org/draft-07/schema#",
                                 "properties": {"a": {}, "b": {"type": "integer"}},
                                 "dependencies": {"a": {"required": ["b"],
                                                        "properties": {"b": {"minimum": 5}}}}},
                                [{"a": 1, "b": 6}, {"a": 1, "b": 2}, {"a": 1}, {"b": 2}]),
    "dependentSchemas": ({"properties": {"a": {}, "b": {}},
                          "dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}},
                         [{"a": 1, "b": "s"}, {"a": 1, "b": 2}, {"b": 2}]),
    "items": ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
              [[], [1], [1, 2, 3], [1, 2, 3, 4], ["a"], [1, "a"]]),
    "prefixItems": ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                     "items": False},
                    [[], ["a"], ["a", 1], ["a", 1, 2], [1], ["a", "b"]]),
    "tuple items (draft-07)": ({"$schema": "http://json-schema.org/draft-07/schema#",
                                "items": [{"type": "string"}], "additionalItems":
                                    {"type": "integer"}, "minItems": 2},
                               [["a"], ["a", 1], ["a", 1, 2], ["a", "b"], []]),
    "contains": ({"type": "array", "items": {"type": "integer"},
                  "contains": {"minimum": 10}, "minContains": 2, "maxContains": 3},
                 [[], [10], [10, 11], [1, 10, 2, 11], [10, 11, 12, 13], [10, 11, 12], [1, 2]]),
    "uniqueItems (finite)": ({"type": "array", "items": {"enum": ["a", "b", "c"]},
                              "uniqueItems": True},
                             [[], ["a"], ["a", "b"], ["a", "a"], ["c", "b", "a"],
                              ["a", "b", "a"]]),
    "strings": ({"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]"},
                ["ab", "a", "abcd", "abcde", "Ab", "a\u00e9", "a\"b"]),
    "integer bounds": ({"type": "integer", "minimum": -3, "exclusiveMaximum": 10,
                        "multipleOf": 2},
                       [-4, -2, 0, 8, 10, 3, 12]),
    "number bounds": ({"type": "number", "exclusiveMinimum": 0, "maximum": 1.5},
                      [0, 0.1, 1.5, 1.6, -1]),
    "draft-04 exclusive": ({"$schema": "http://json-schema.org/draft-04/schema#",
                            "type": "integer", "minimum": 0, "exclusiveMinimum": True},
                           [0, 1, -1]),
    "allOf": ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
                          "required": ["a"]},
                         {"properties": {"a": {"minimum": 3}, "b": {"type": "string"}}}]},
              [{"a": 3}, {"a": 2}, {"a": 4, "b": "x"}, {"a": 4, "b": 1}, {"b": "x"}]),
    "anyOf": ({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]},
              ["x", 1, -1, None]),
    "oneOf disjoint": ({"oneOf": [{"type": "string"}, {"type": "array"}]}, ["x", [], 1]),
    "oneOf overlapping": ({"type": "object", "properties": {"a": {}, "b": {}},
                           "additionalProperties": False,
                           "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
                          [{"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {}]),
    "oneOf by const": ({"oneOf": [{"properties": {"k": {"const": "x"}, "v": {"type": "string"}},
                                   "required": ["k"]},
                                  {"properties": {"k": {"const": "y"}, "v": {"type": "integer"}},
                                   "required": ["k"]}]},
                       [{"k": "x", "v": "s"}, {"k": "y", "v": 1}, {"k": "x", "v": 1}]),
    "oneOf closed objects": ({"oneOf": [
        {"properties": {"path": {"type": "string"}}, "required": ["path"],
         "additionalProperties": False},
        {"properties": {"b64": {"type": "string"}}, "required": ["b64"],
         "additionalProperties": False}]},
        [{"path": "x"}, {"b64": "y"}, {"path": "x", "b64": "y"}, {}, 1, "s"]),
    "not type": ({"not": {"type": "string"}}, ["x", 1, None, [], {}]),
    "not enum": ({"type": "string", "not": {"enum": ["a", "b"]}}, ["a", "b", "c", ""]),
    "not required": ({"type": "object", "not": {"required": ["a"]}}, [{}, {"a": 1}, {"b": 1}]),
    "not pattern": ({"type": "string", "not": {"pattern": "^x"}}, ["xa", "ax", ""]),
    "not number const": ({"type": "number", "not": {"const": 1}}, [1, 1.0, 0, 2, 1.5]),
    "if/then/else": ({"if": {"properties": {"k": {"const": "n"}}, "required": ["k"]},
                      "then": {"properties": {"v": {"type": "integer"}}},
                      "else": {"properties": {"v": {"type": "string"}}},
                      "type": "object"},
                     [{"k": "n", "v": 1}, {"k": "n", "v": "s"}, {"k": "m", "v": "s"},
                      {"k": "m", "v": 1}, {"v": "s"}]),
    "boolean schemas": ({"properties": {"a": True, "b": False}}, [{"a": 1}, {"b": 1}, {}]),
    "annotations": ({"type": "string", "title": "t", "description": "d", "default": "x",
                     "examples": ["y"], "x-vendor": {"type": "integer"}, "deprecated": True},
                    ["x", 1]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_keyword_matches_jsonschema(name: str) -> None:
    schema, instances = CASES[name]
    check_against_jsonschema(schema, instances)


def test_refs_with_pointer_escapes_ids_and_anchors() -> None:
    schema = {
        "$id": "https://example.com/root.json",
        "$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "string"},
                  "pct%": {"type": "boolean"},
                  "inner": {"$id": "inner.json", "$defs": {"x": {"const": 7}}},
                  "anchored": {"$anchor": "here", "type": "null"}},
        "properties": {"p": {"$ref": "#/$defs/a~1b"}, "q": {"$ref": "#/$defs/c~0d"},
                       "r": {"$ref": "#/$defs/pct%25"}, "s": {"$ref": "inner.json#/$defs/x"},
                       "t": {"$ref": "#here"}, "u": {"$ref": "other.json"}},
    }
    registry = {"https://example.com/other.json": {"type": "array", "maxItems": 1}}
    aut = automaton(schema, registry=registry)
    assert accepts(aut, '{"p": 1, "q": "x", "r": true, "s": 7, "t": null, "u": [1]}')
    for bad in ('{"p": "x"}', '{"q": 1}', '{"r": 1}', '{"s": 8}', '{"t": 1}', '{"u": [1, 2]}'):
        assert not accepts(aut, bad), bad


def test_openapi_nullable() -> None:
    aut = automaton({"type": "string", "nullable": True})
    assert accepts(aut, '"x"') and accepts(aut, "null") and not accepts(aut, "1")


def test_draft07_ref_hides_its_siblings() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#",
              "definitions": {"s": {"type": "string"}},
              "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}}}
    check_against_jsonschema(schema, [{"a": "xyz"}, {"a": 1}])


def test_recursive_schema_becomes_a_recursive_rule() -> None:
    schema = {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"}
    check_against_jsonschema(schema, [
        {"v": 1}, {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]},
        {"v": 1, "kids": [{"kids": []}]}, {"v": 1, "kids": [{"v": "x"}]}])


def test_whitespace_policy_and_empty_containers() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array"}}}
    aut = automaton(schema, max_whitespace=2)
    for text in ('{}', '{ }', '{"a": []}', '{"a":[ ]}', '{\n "a" :\t[1,2]\r}'):
        assert accepts(aut, text), text
    assert not accepts(aut, '{"a":   []}')  # three blanks: over the bound
    compact = automaton(schema, whitespace="compact")
    assert accepts(compact, '{"a":[1,2]}')
    assert not accepts(compact, '{"a": []}')


def test_property_order() -> None:
    schema = {"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
              "required": ["c", "a"], "additionalProperties": False}
    in_order = automaton(schema, property_order="schema")
    assert accepts(in_order, '{"a": 1, "b": 2, "c": 3}')
    assert accepts(in_order, '{"c": 3, "a": 1, "b": 2}')  # required first, as listed
    assert not accepts(in_order, '{"b": 2, "a": 1, "c": 3}')
    for any_order in (automaton(schema), automaton(schema, property_order="any")):
        assert accepts(any_order, '{"b": 2, "a": 1, "c": 3}')
        assert not accepts(any_order, '{"a": 1, "a": 1, "c": 3}')


def test_masks_are_exact_prefixes() -> None:
    aut = automaton({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}},
                     "required": ["a"], "additionalProperties": False})
    assert viable(aut, '{"a": "x')
    assert not viable(aut, '{"a": "x"')  # minLength 2 cannot hold any more
    assert not viable(aut, '{}')
    assert not viable(aut, '{"b')


@pytest.mark.parametrize(("schema", "where"), [
    ({"type": "string", "minLength": 5, "maxLength": 3}, ""),
    ({"type": "object", "properties": {"a": {"type": "integer", "enum": ["x", "y"]}},
      "required": ["a"]},
     "/properties/a"),
    ({"type": "array", "minItems": 3, "maxItems": 1}, ""),
    ({"type": "object", "required": ["a"], "properties": {"a": False}}, ""),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, ""),
    ({"type": "integer", "minimum": 5, "maximum": 4}, ""),
])
def test_unsatisfiable_schema_is_a_compile_error(schema, where: str) -> None:
    with pytest.raises(CompileError) as err:
        compile_schema(tether.JsonSchema(schema))
    assert "unsatisfiable" in err.value.message
    assert err.value.location.startswith(where)


@pytest.mark.parametrize(("schema", "where"), [
    ({"type": "strin"}, "/type"),
    ({"properties": {"a": {"minLength": -1}}}, "/properties/a/minLength"),
    ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "/properties/a/$ref"),
    ({"$ref": "https://elsewhere.example/s.json"}, "/$ref"),
    ({"items": {"$dynamicRef": "#x"}}, "/items/$dynamicRef"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
     "/$defs/a"),
    ({"type": "array", "items": {"type": "integer", "maximum": 9}, "uniqueItems": True},
     "/uniqueItems"),
    ({"enum": []}, "/enum"),
])
def test_bad_schema_is_a_compile_error_with_its_pointer(schema, where: str) -> None:
    with pytest.raises(CompileError) as err:
        compile_schema(tether.JsonSchema(schema))
    assert err.value.location == where


def test_lenient_mode_warns_and_ignores() -> None:
    schema = {"type": "array", "items": {"type": "integer", "maximum": 9}, "uniqueItems": True,
              "unevaluatedItems": False}
    with pytest.warns(UserWarning, match="uniqueItems"):
        aut = automaton(schema, strict=False)
    assert accepts(aut, "[1, 1]")


def test_deep_nesting_is_bounded() -> None:
    schema: dict = {"type": "integer"}
    for _ in range(300):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    with pytest.raises(CompileError) as err:
        compile_schema(tether.JsonSchema(schema))
    assert err.value.location.startswith("/properties/a/properties/a")


def test_from_pydantic() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: int
        y: int = 0
        tags: list[str] = []

    aut = to_automaton(compile_schema(tether.JsonSchema.from_pydantic(Point)))
    for data in (Point(x=1), Point(x=1, y=2, tags=["a"])):
        assert accepts(aut, json.dumps(data.model_dump(), ensure_ascii=False))
    assert not accepts(aut, '{"y": 2}')


def test_token_masks_walk_instances(smollm2_vocab) -> None:
    schema = {"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
        "required": ["id"], "additionalProperties": False}}
    compiled = tether.compile(tether.JsonSchema(schema), smollm2_vocab)
    text = json.dumps([{"id": 1, "tags": ["a"]}, {"id": 22}], ensure_ascii=False)
    assert compiled.check(text).matches
    assert not compiled.check(text.replace("22", '"x"')).matches
    matcher = compiled.matcher()
    for token in _greedy(smollm2_vocab, text.encode()):
        assert matcher.allowed(token)
        matcher.consume(token)
    assert matcher.eos_allowed()


def _greedy(vocab, data: bytes) -> list[int]:
    index = {vocab.token_bytes(i): i for i in range(vocab.size)
             if vocab.token_bytes(i) and not vocab.is_special(i)}
    longest = max(map(len, index))
    out, i = [], 0
    while i < len(data):
        for n in range(min(longest, len(data) - i), 0, -1):
            if data[i:i + n] in index:
                out.append(index[data[i:i + n]])
                i += n
                break
    return out


def test_if_then_else_follow_the_declared_draft() -> None:
    # if/then/else came with draft-07: a draft-04 or draft-06 document's "then" is an
    # unknown word, as validators of those drafts read it (MaskBench o3385, o39097).
    body = {"type": "object", "if": {"properties": {"k": {"const": "n"}}, "required": ["k"]},
            "then": {"required": ["v"]}}
    text = '{"k": "n"}'
    for draft, enforced in (("draft-04", False), ("draft-06", False), ("draft-07", True)):
        schema = {"$schema": f"http://json-schema.org/{draft}/schema#", **body}
        assert accepts(automaton(schema), text) is not enforced, draft
        assert jsonschema.validators.validator_for(schema)(schema).is_valid(
            json.loads(text)) is not enforced, draft
    assert not accepts(automaton(body), text)  # no $schema: 2020-12


def test_combinator_blow_up_is_a_located_limit() -> None:
    # oneOf exclusivity over object alternatives that nest further oneOfs: the shape
    # algebra is bounded (algebra.MAX_INTERSECTIONS), never a hang.
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "shared/data/maskbench"
    path = data / "Github_trivial---o63308.json"
    if not path.is_file():
        pytest.skip("the MaskBench data is not present")
    schema = json.loads(path.read_text())["schema"]
    with pytest.raises(tether.LimitExceeded) as error:
        compile_schema(tether.JsonSchema(schema))
    assert error.value.location.startswith("/oneOf/")


_OBJECTS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "names": {"type": "integer"},
                                      "id": {"type": "integer"}, "ünï": {"type": "null"},
                                      "a\\b": {"type": "null"}, "": {"type": "null"}}},
    {"type": "object", "properties": {"x": {"type": "integer"}},
     "additionalProperties": {"type": "boolean"}},
]
_INSTANCES = [{}, {"name": "n", "id": 3}, {"names": 1, "nam": True, "nameless": 0},
              {"ünï": None, "ü": 1, "a\\b": None, "a\\": 2, "": None},
              {"x": 1, "id": True, "xx": False, "y": True}, {"idid": 4, "i": 5, "d": 6}]


def test_frames_of_key_states_derived_from_the_free_key_state(smollm2_vocab, smollm2_encode,
                                                              monkeypatch) -> None:
    """An object's extra keys (any string but its properties' names) are masked from the
    state after a character no name starts with, less the names' ends: every mask along
    every instance equals the mask walked directly."""
    from tether.engine.pda import PushdownAutomaton

    validator = jsonschema.Draft202012Validator
    walks = [(tether.JsonSchema(schema), text, tokens)
             for schema in _OBJECTS for instance in _INSTANCES
             if validator(schema).is_valid(instance)
             for text in (json.dumps(instance, ensure_ascii=False),
                          json.dumps(instance))  # (also \\u escapes of non-ASCII)
             for tokens in (smollm2_encode(text), _bytes_as_tokens(smollm2_vocab, text))]
    derived = _masks_along(smollm2_vocab, walks)
    monkeypatch.setattr(PushdownAutomaton, "frame_exception", lambda self, item: None)
    _assert_same_masks(walks, derived, _masks_along(smollm2_vocab, walks))


def test_frames_of_automaton_states_shared_by_shallow_form(smollm2_vocab, smollm2_encode,
                                                           monkeypatch) -> None:
    """States of a pre-built automaton (strings that count characters, patterns) that
    read alike on every string of up to the vocabulary's shallow depth share a walked
    frame, their tokens longer than that read again: every mask along instances — with
    runs of ``#`` that SmolLM2 spells in tokens of up to 81 bytes, near the lengths'
    bounds — equals the mask walked for each state, and frames were shared."""
    from tether.engine.pushdown import PushdownCompiled

    schemas = [({"type": "object", "properties": {
                    "a": {"type": "string", "maxLength": 90},
                    "b": {"type": "string", "minLength": 30, "maxLength": 300},
                    "c": {"type": "string", "pattern": "^[a-z#]{2,70}$"}}},
                [{"a": "#" * 90, "b": "#" * 85 + " tail", "c": "ab" + "#" * 68},
                 {"a": "x" * 12 + "#" * 70, "b": "y" * 30, "c": "hello"}]),
               ({"type": "array", "items": {"type": "string", "maxLength": 40}},
                [["#" * 40, "#" * 39 + "x", "short"]])]
    walks = [(tether.JsonSchema(schema), text, tokens)
             for schema, instances in schemas for instance in instances
             for text in [json.dumps(instance)]
             for tokens in (smollm2_encode(text), _bytes_as_tokens(smollm2_vocab, text))]
    shared: list[int] = []
    with_long_tokens = PushdownCompiled._with_long_tokens
    # A vocabulary whose long tokens close strings deep inside (the ends of a frame past
    # the shallow depth, read again too): every byte, and runs that end in a quote.
    long = [b"#" * n + tail for n in (14, 20, 27, 33) for tail in (b"", b'"', b'", "', b'"}')]
    vocab = tether.Vocabulary([bytes([b]) for b in range(256)] + long + [b""],
                              eos_ids=[256 + len(long)])
    small = [(tether.JsonSchema({"type": "object", "properties": {
                 "a": {"type": "string", "maxLength": length},
                 "b": {"type": "string", "maxLength": length + 15}}}), text,
              _longest_first(vocab, text))
             for length in (20, 30, 60)
             for text in (json.dumps({"a": "#" * (length - 3), "b": "#" * (length + 15)}),
                          json.dumps({"b": "x#" + "#" * length, "a": "##"}))]
    for walks_of, vocab_of in ((walks, smollm2_vocab), (small, vocab)):
        shared.clear()
        monkeypatch.undo()
        monkeypatch.setattr(PushdownCompiled, "_with_long_tokens",
                            lambda self, item, like: shared.append(item) or
                            with_long_tokens(self, item, like))
        by_form = _masks_along(vocab_of, walks_of)
        assert len(shared) > 20
        monkeypatch.setattr(PushdownCompiled, "_shallow_key", lambda self, item: None)
        _assert_same_masks(walks_of, by_form, _masks_along(vocab_of, walks_of))


def test_shallow_forms_shared_across_bounds_and_schemas(smollm2_vocab, monkeypatch) -> None:
    """A counted string's state far from its bounds reads, to the shallow depth, what
    any such state reads — whatever the bounds and the schema, counted to a maximum (a
    chain of states) or not (a loop): once one schema's strings are walked, another's
    with other bounds walk no frame of a string state but near their bounds."""
    from tether.engine.pushdown import PushdownCompiled

    walked = []
    walk_frame = PushdownCompiled._walk_frame
    monkeypatch.setattr(PushdownCompiled, "_walk_frame", lambda self, item: walked.append(
        self.pda.copied_state(item)) or walk_frame(self, item))
    first = {"type": "object", "properties": {"s": {"type": "string", "minLength": 3}}}
    second = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 250}}
    text = "x" * 60
    walks = [(tether.JsonSchema(schema), json.dumps(value),
              _bytes_as_tokens(smollm2_vocab, json.dumps(value)))
             for schema, value in ((first, {"s": text}), (second, [text, text]))]
    from tether.compiler import clear_cache
    from tether.engine.shared_frames import clear_shared_frames

    clear_cache()
    clear_shared_frames()
    for constraint, _, tokens in walks:
        walked.clear()
        matcher = tether.compile(constraint, smollm2_vocab).matcher()
        for token in tokens:
            matcher.mask()
            matcher.consume(token)
        counts = [state for copied in walked if copied is not None for state in [copied[1]]]
        if constraint is walks[0][0]:
            assert counts  # the first schema's strings were walked
        else:  # the second's: its first state at most (minLength 1 in reach)
            assert len(counts) <= 1, counts


def test_frames_of_automaton_states_read_by_their_moves(smollm2_vocab, smollm2_encode,
                                                        monkeypatch) -> None:
    """A frame of a state of a pre-built automaton (a string that counts characters, a
    pattern, a format), what it reads below trie nodes and its long tokens are read by
    the automaton's own moves, compiled (a whole frame by a dense table of them) — the
    same masks as walked over item sets, along instances with escapes, multi-byte
    characters and runs of ``#`` (SmolLM2's longest tokens)."""
    from tether.engine import pushdown
    from tether.engine.pushdown import PushdownCompiled

    schema = {"type": "object", "properties": {
        "a": {"type": "string", "minLength": 2, "maxLength": 40},
        "b": {"type": "string", "pattern": "^[a-f0-9#]{4,30}$"},
        "c": {"type": "string", "format": "date-time"},
        "d": {"type": "array", "items": {"type": "string", "maxLength": 6}},
        "e": {"type": "object", "additionalProperties": {"type": "integer"}}}}
    instances = [{"a": "ü\\n\"x" + "#" * 30, "b": "#" * 24 + "ab", "c": "2024-01-02T03:04:05Z",
                  "d": ["", "é€😀", "\\u00e9"], "e": {"k\\u0041y": 1, "#" * 20: 2}},
                 {"e": {}, "d": ["######"], "a": "ab", "b": "0123"}]
    walks = [(tether.JsonSchema(schema), text, tokens)
             for instance in instances for text in [json.dumps(instance, ensure_ascii=False)]
             for tokens in (smollm2_encode(text), _bytes_as_tokens(smollm2_vocab, text))]
    read = [0]
    walk_copied = PushdownCompiled._walk_copied

    def counted(self, item, trie, roots):
        out = walk_copied(self, item, trie, roots)
        read[0] += out is not None
        return out

    tables = [0]
    move_table = pushdown.move_table

    def counted_table(moves, *, build):
        table = move_table(moves, build=build)
        tables[0] += table is not None
        return table

    monkeypatch.setattr(PushdownCompiled, "_walk_copied", counted)
    monkeypatch.setattr(pushdown, "move_table", counted_table)
    by_moves = _masks_along(smollm2_vocab, walks)
    assert read[0] > 20 and tables[0] > 5
    monkeypatch.setattr(PushdownCompiled, "_walk_copied", lambda self, item, trie, roots: None)
    _assert_same_masks(walks, by_moves, _masks_along(smollm2_vocab, walks))


def _longest_first(vocab, text: str) -> list[int]:
    """``text`` in the longest tokens of ``vocab``, left to right."""
    data, ids = text.encode(), {vocab.token_bytes(t): t for t in range(vocab.size)}
    out, at = [], 0
    while at < len(data):
        size = max(n for n in range(1, len(data) - at + 1) if data[at:at + n] in ids)
        out.append(ids[data[at:at + size]])
        at += size
    return out


def _bytes_as_tokens(vocab, text: str) -> list[int]:
    """``text`` a byte at a time (single-byte tokens): a walk reaching every position."""
    by_bytes = {vocab.token_bytes(t): t for t in range(vocab.size)}
    return [by_bytes[bytes([b])] for b in text.encode()]


def _masks_along(vocab, walks: list[tuple]) -> list[list[np.ndarray]]:
    """The mask before each token of each ``(constraint, text, tokens)`` walk, until a
    token is refused; compiled from scratch (the frames of leaf rules too, which are
    shared across compiles)."""
    from tether.compiler import clear_cache
    from tether.engine.shared_frames import clear_shared_frames

    clear_cache()
    clear_shared_frames()
    out = []
    for constraint, _, tokens in walks:
        matcher = tether.compile(constraint, vocab).matcher()
        seen = []
        for token in tokens:
            seen.append(matcher.mask().copy())
            if not matcher.allowed(token):
                break
            matcher.consume(token)
        out.append(seen)
    return out


def _assert_same_masks(walks: list[tuple], a: list[list[np.ndarray]],
                       b: list[list[np.ndarray]]) -> None:
    for (_, text, _), x, y in zip(walks, a, b, strict=True):
        assert len(x) == len(y), text
        for k, (mx, my) in enumerate(zip(x, y, strict=True)):
            assert np.array_equal(mx, my), (text, k)


def _composition_walks(vocab, encode) -> list[tuple]:
    """Walks through schemas and grammars whose masks are composed from chains, parts and
    callees' frames (real tokens, then a byte at a time)."""
    from pathlib import Path

    sql = (Path(__file__).parent / "grammars/sql_select.lark").read_text()
    cases = [(tether.JsonSchema(schema), json.dumps(instance, ensure_ascii=ascii_only))
             for schema, instances in [
                 (_OBJECTS[0], [{"name": "n", "id": 3}, {"names": 1, "nameless": 0},
                                {"ünï": None, "a\\b": None, "": None}]),
                 ({"type": "object", "properties": {
                     "kind": {"enum": ["alpha", "alphabet", "beta"]},
                     "tag": {"const": "fixed value"},
                     "items": {"type": "array", "items": {"enum": [True, None, "x y"]}},
                     "sub": {"type": "object", "required": ["deep"],
                             "properties": {"deep": {"type": "number"}},
                             "additionalProperties": False}},
                   "required": ["kind"], "additionalProperties": False},
                  [{"kind": "alphabet", "tag": "fixed value", "items": [True, "x y", None]},
                   {"sub": {"deep": 1.5}, "kind": "beta"}, {"kind": "alpha", "items": []}]),
                 ({"type": "object", "minProperties": 1, "maxProperties": 3, "properties": {
                     "a": {"type": ["integer", "string", "null"]}, "ab": {"type": "boolean"},
                     "b": {"anyOf": [{"type": "array", "items": {"type": "integer"}},
                                     {"type": "object"}]}, "c": {}}},
                  [{"b": [1, 2], "a": "x", "ab": False}, {"c": {"q": [None, 1.5]}, "a": None},
                   {"zz": 1, "b": {"k": "v"}}, {"ab": True}]),
                 ({"type": "array", "items": {"enum": ["ab", "cd", "x"]}},
                  [["ab", "cd", "x", "ab"], ["x"]]),
             ] for instance in instances for ascii_only in (False, True)]
    cases += [(tether.Grammar(sql, syntax="lark"), text) for text in (
        "SELECT name, count(*) AS n FROM people p WHERE age >= 18 AND name LIKE 'a%'",
        "select distinct a.b from t inner join u on t.x = u.y order by a desc limit 10;",
        "SeLeCt * FrOm t WHERE x IS NOT NULL OR y NOT IN (1, 'two', null)")]
    cases += [(tether.grammars.python(), text) for text in (
        "import os.path as p\n\ndef f(x, *a, k=1):\n    return [y ** 2 for y in a if not y]\n",
        "class C(B):\n    @property\n    def v(self) -> int:\n        return self._v or -1\n",
        "try:\n    x = {k: v[1:-1] for k, v in d.items()}  # note\nexcept (A, B) as e:\n"
        "    raise E(f'{e!r}') from None\n",
        "with open(p) as f, g(\n        'x',\n        y=lambda z: z if z else 0.5e3):\n"
        "    while (n := f.read(1)) != b'':\n        total += n[0] << 2 & 0xff\n")]
    walks = [(constraint, text, tokens) for constraint, text in cases
             for tokens in (encode(text), _bytes_as_tokens(vocab, text))]

    return walks


def test_chained_and_composed_frames_equal_walked_frames(smollm2_vocab, smollm2_encode,
                                                        monkeypatch) -> None:
    """A frame that must first read a literal (a key, an enum value, a keyword) is the
    tokens along that path of the trie plus what follows below its end, and a frame of a
    rule that calls rules (a value's alternatives, an object's members in any order, an
    expression) is composed from its own moves and its callees' frames: every mask along
    instances of schemas and strings of grammars with byte classes (SQL; Python, whose
    blanks and longest-matched names guard what follows them) equals the mask walked
    directly."""
    from tether.engine.pda import PushdownAutomaton

    walks = _composition_walks(smollm2_vocab, smollm2_encode)
    chained = _masks_along(smollm2_vocab, walks)
    monkeypatch.setattr(PushdownAutomaton, "forced_chain", lambda self, item: None)
    monkeypatch.setattr(PushdownAutomaton, "frame_parts", lambda self, item: None)
    _assert_same_masks(walks, chained, _masks_along(smollm2_vocab, walks))


def test_frames_skipped_by_their_first_bytes_read_nothing(smollm2_vocab, smollm2_encode,
                                                         monkeypatch) -> None:
    """What a frame reads below trie nodes none of whose edges it may read first is
    skipped (``PushdownCompiled._may_read_below``, by the item set's first classes): every
    mask along the walks equals the mask composed without that check."""
    from tether.engine.pushdown import PushdownCompiled

    walks = _composition_walks(smollm2_vocab, smollm2_encode)
    checked = _masks_along(smollm2_vocab, walks)
    monkeypatch.setattr(PushdownCompiled, "_may_read_below", lambda self, item, nodes: True)
    _assert_same_masks(walks, checked, _masks_along(smollm2_vocab, walks))


def test_a_byte_step_of_an_item_set_is_its_row_entry(smollm2_vocab, smollm2_encode) -> None:
    """What ``consume`` reads a byte with (``_item_step``: from the moves of the item
    set's states covering its class, without the row of every class) is, for every item
    set the composition walks made and every class, the entry of its row."""
    from tether.compiler import clear_cache

    clear_cache()
    checked = 0
    for constraint, _, tokens in _composition_walks(smollm2_vocab, smollm2_encode):
        matcher = tether.compile(constraint, smollm2_vocab).matcher()
        for token in tokens:
            if not matcher.allowed(token):
                break
            matcher.consume(token)
        pda = getattr(matcher.compiled, "pda", None)
        if pda is None:
            continue
        for item in range(len(pda._items)):
            steps = [pda._item_step(item, c) for c in range(pda.n_classes)]
            assert steps == list(pda.item_row(item)), item
            checked += 1
    assert checked > 100


def test_first_classes_past_their_depth_are_every_class(smollm2_vocab, monkeypatch) -> None:
    """Item sets whose first classes lie more calls away than MAX_FIRST_DEPTH (a chain of
    80 rules each starting with the next, 80 rules in a row that may be empty) count
    every class: no RecursionError, and the masks are those without the check."""
    from tether.engine.pda import MAX_FIRST_DEPTH
    from tether.engine.pushdown import PushdownCompiled

    n = 80
    assert n > MAX_FIRST_DEPTH
    text = "\n".join([
        'root ::= c0 | s0 "z"',
        *(f'c{i} ::= c{i + 1} "a"' for i in range(n)), f'c{n} ::= "b" | "(" root ")"',
        *(f's{i} ::= "q{i}"? s{i + 1}' for i in range(n)), f's{n} ::= "!"?'])
    grammar = tether.Grammar(text, syntax="gbnf")
    walks = [(grammar, t, _bytes_as_tokens(smollm2_vocab, t))
             for t in ("b" + "a" * n, "(" + "b" + "a" * n + ")" + "a" * n, "z", "q3q70!z")]
    checked = _masks_along(smollm2_vocab, walks)
    assert all(len(masks) == len(tokens) for masks, (_, _, tokens) in zip(checked, walks,
                                                                          strict=True))
    monkeypatch.setattr(PushdownCompiled, "_may_read_below", lambda self, item, nodes: True)
    _assert_same_masks(walks, checked, _masks_along(smollm2_vocab, walks))


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(0, 3)),
                max_size=40))
def test_shared_store_counts_an_array_once(puts) -> None:
    """A shared store counts each array it holds once, however many entries hold it (a
    frame is kept under two keys), and stays within its bounds but for the newest entry."""
    from tether.engine.shared_frames import SharedStore

    arrays = [np.zeros(8 << k, dtype=np.uint32) for k in range(4)]
    store = SharedStore(max_entries=4, max_bytes=600)
    vocab = type("V", (), {"fingerprint": "v"})()
    for key, a, b in puts:
        store.put(vocab, key, (arrays[a], None, arrays[b]))
        held = {id(x): x for value in store.values() for x in value if x is not None}
        assert store.bytes == sum(x.nbytes for x in held.values())
        assert len(store.values()) <= 4
        assert store.bytes <= 600 or len(store.values()) == 1


def test_shared_frames_are_bounded_in_bytes(smollm2_vocab, monkeypatch) -> None:
    """Leaf-rule pieces shared across grammars (frames, what they read below trie nodes)
    stay within their byte bounds, and what they hold is accounted exactly."""
    from tether.engine import shared_frames

    shared_frames.clear_shared_frames()
    for store in (shared_frames.FRAMES, shared_frames.BELOW):
        monkeypatch.setattr(store, "max_bytes", 64 << 10)
    for i in range(30):
        schema = {"type": "object", "properties": {f"key{i}_{j}": {"type": "string"}
                                                   for j in range(4)},
                  "required": [f"key{i}_{j}" for j in range(4)]}
        matcher = tether.compile(tether.JsonSchema(schema), smollm2_vocab).matcher()
        for token in smollm2_vocab.segment(f'{{"key{i}_0": "'.encode()):
            matcher.mask()
            matcher.consume(token)
        matcher.mask()
        for store in (shared_frames.FRAMES, shared_frames.BELOW):
            assert store.bytes <= 64 << 10
    for store in (shared_frames.FRAMES, shared_frames.BELOW):
        arrays = {id(a): a for value in store.values() for a in value
                  if isinstance(a, np.ndarray)}  # (one array may be held under two keys)
        assert 0 < sum(a.nbytes for a in arrays.values()) == store.bytes
    shared_frames.clear_shared_frames()


def test_compile_cache_limit(smollm2_vocab) -> None:
    """``limit_cache`` bounds what the cached constraints hold and evicts at once (the
    newest is kept whatever it holds); the library's bound comes back after."""
    from tether import compiler

    default = compiler.MAX_CACHED_BYTES
    compiler.clear_cache()
    try:
        for n in range(3):
            tether.compile(tether.JsonSchema({"type": "integer", "minimum": n}), smollm2_vocab)
        assert len(compiler._cache) == 3
        compiler.limit_cache(1)
        assert len(compiler._cache) == 1
        tether.compile(tether.JsonSchema({"type": "string", "maxLength": 3}), smollm2_vocab)
        assert len(compiler._cache) == 1
        assert compiler.cached_bytes() > 1
        compiler.shrink_cache()  # (the newest too: what a server does after a request)
        assert len(compiler._cache) == 0 and compiler.cached_bytes() == 0
    finally:
        compiler.limit_cache(default)
        compiler.clear_cache()


def test_resident_constraints_outlive_the_cache_bound(smollm2_vocab) -> None:
    """A constraint kept resident stays compiled (the same object) past the bound and
    past ``shrink_cache``, and does not count against the bound: the others are evicted
    as if it were not there."""
    from tether import compiler

    default = compiler.MAX_CACHED_BYTES
    compiler.clear_cache()
    resident = tether.JsonSchema({"type": "array", "items": {"type": "integer"}})
    try:
        compiler.keep_resident(resident)
        first = tether.compile(resident, smollm2_vocab)
        first.matcher().mask()
        compiler.limit_cache(first.held_bytes // 2 + 1)
        others = [tether.JsonSchema({"type": "integer", "minimum": n}) for n in range(2)]
        for other in others:
            tether.compile(other, smollm2_vocab)
        assert [key[0] for key in compiler._cache] == [resident, others[1]]
        compiler.shrink_cache()
        assert tether.compile(resident, smollm2_vocab) is first
        assert [key[0] for key in compiler._cache] == [resident]
    finally:
        compiler.limit_cache(default)
        compiler.clear_cache()


def test_formats_assert_by_default_and_annotate_on_request():
    schema = {"type": "string", "format": "date"}
    vocab = tether.Vocabulary.of_bytes()

    def accepts(constraint, text: str) -> bool:
        matcher = tether.compile(constraint, vocab).matcher()
        for byte in text.encode():
            if not matcher.allowed(byte):
                return False
            matcher.consume(byte)
        return matcher.is_accepting()

    assert accepts(tether.JsonSchema(schema), '"2024-02-29"')
    assert not accepts(tether.JsonSchema(schema), '"tomorrow"')
    assert accepts(tether.JsonSchema(schema, formats="annotate"), '"tomorrow"')
    with pytest.raises(CompileError, match="formats"):
        tether.JsonSchema(schema, formats="ignore")


@pytest.mark.parametrize("schema", [
    # draft-04 has no $id (its identifier is id): "#/…" stays in the document
    {"$schema": "http://json-schema.org/draft-04/schema#",
     "definitions": {"a": {"type": "integer"}},
     "properties": {"x": {"$id": "/sub", "$ref": "#/definitions/a"}}},
    # up to draft-07 a $ref hides its siblings, $id included
    {"$schema": "http://json-schema.org/draft-07/schema#",
     "definitions": {"a": {"type": "integer"}},
     "properties": {"x": {"$id": "http://example.com/other", "$ref": "#/definitions/a"}}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/r.json",
     "definitions": {"a": {"id": "#foo", "type": "integer"}},
     "properties": {"x": {"$ref": "#foo"}}},
])
def test_identifiers_per_draft(schema) -> None:
    check_against_jsonschema(schema, [{"x": 1}, {"x": "s"}, {}])


def test_move_tables_stay_within_their_bound(monkeypatch) -> None:
    """The dense move tables (and the moves they keep alive) stay within their byte bound,
    the least recently used going first; a table looks moves up as the moves say."""
    from tether.automata.nfa import CopiedMoves
    from tether.engine import copied_reads

    def chain(n: int) -> CopiedMoves:  # n states, state k moves to k + 1 on b"a".."z"
        return CopiedMoves(np.arange(n + 1, dtype=np.int64).clip(max=n - 1),
                           np.full(n - 1, 97, dtype=np.int64), np.full(n - 1, 122, dtype=np.int64),
                           np.arange(1, n, dtype=np.int64), np.arange(n) == n - 1)

    monkeypatch.setattr(copied_reads, "_tables", type(copied_reads._tables)())
    monkeypatch.setattr(copied_reads, "_tables_bytes", 0)
    monkeypatch.setattr(copied_reads, "MAX_TABLES_BYTES", 20_000)
    kept = [chain(100) for _ in range(12)]
    for moves in kept:
        class_of_byte, table = copied_reads.move_table(moves, build=True)
        assert table[5, class_of_byte[ord("q")]] == 6 and table[5, class_of_byte[ord("A")]] == -1
    assert 0 < copied_reads.move_table_bytes() <= 20_000
    assert copied_reads.move_table(kept[0], build=False) is None  # the oldest went first
    assert copied_reads.move_table(kept[-1], build=False) is not None


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 200), unique=True), st.lists(st.integers(0, 200), unique=True),
       st.lists(st.tuples(st.integers(0, 200), st.integers(1, 20)), max_size=8))
def test_kept_ends_is_the_set_difference(ends, gone, spans) -> None:
    """The ends an excepted frame keeps: those outside the subtrees it cannot read (as
    disjoint node ranges) and not among the ends only the frame it reads like has."""
    from tether.engine.pushdown import _kept_ends

    first, stop, last = [], [], -1
    for start, length in sorted(spans):  # (made disjoint)
        if start > last:
            first.append(start)
            stop.append(start + length)
            last = start + length - 1
    expected = [e for e in sorted(ends) if e not in set(gone)
                and not any(a <= e < b for a, b in zip(first, stop, strict=True))]
    kept = _kept_ends(np.array(sorted(ends), dtype=np.int64), np.array(first, dtype=np.int64),
                      np.array(stop, dtype=np.int64), np.array(sorted(gone), dtype=np.int64))
    assert kept.tolist() == expected
