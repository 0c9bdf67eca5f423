"""What the matcher checks beside the grammar (tether/schema/runtime_checks.py,
tether/engine/json_checks.py): ``uniqueItems`` on items that are not a small finite set
(the token that decides an item equal to an earlier one is refused) and ``maxLength``
too large for an automaton (code points counted). Walks are compared with the
``jsonschema`` validator; masks are checked token by token on the byte vocabulary and in
random sessions with SmolLM2's tokenizer (multi-byte tokens that close one item and open
the next). With ``distinct_keys`` (the generation policy) no object gets a key twice,
the keys patterns and ``additionalProperties`` allow included."""

from __future__ import annotations

import json

import jsonschema
import pytest
from budget_runs import run_session
from json_schema_suite import accepts

import tether
from tether.engine import bitmask
from tether.errors import CompileError
from tether.session import Session, decider

BYTES = tether.Vocabulary.of_bytes()

ANY_ITEMS = {"uniqueItems": True}
TAGS = {"type": "object", "properties": {
    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"},
                                        "uniqueItems": True}}},
    "required": ["tags"], "additionalProperties": False}
PREFIX = {"prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "uniqueItems": True}

CASES = [
    (ANY_ITEMS, [[1, 2], [1, 1], [1, 1.0], ["a", "a"], ["a", "b"], [{"a": 1, "b": 2},
                 {"b": 2, "a": 1}], [[1], [1]], [[1], [2]], [True, True], [True, 1],
                 [0, False], [None, None], [[], []], [{}, {}], [1, [1]], 5, "x",
                 {"a": [1, 1]}, ["a\"", "a\""], ["é", "\\u00e9"], [1e2, 100]]),
    (TAGS, [{"tags": ["a", "b"]}, {"tags": ["a", "a"]}, {"tags": []},
            {"tags": [], "grid": [[1, 2], [2, 1]]}, {"tags": [], "grid": [[1, 1]]},
            {"tags": [], "grid": [[1], [1]]}]),
    (PREFIX, [[True, False], [True, True], [False, False, 1], [True, False, True],
              [True, False, "x", "x"]]),
]


def _accepts(compiled: tether.Compiled, text: str) -> bool:
    return accepts(compiled, list(text.encode()))  # (byte vocabulary: a byte is a token)


@pytest.mark.parametrize(("schema", "instances"), CASES, ids=["any", "tags", "prefix"])
def test_walks_agree_with_the_validator(schema, instances) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    compiled = tether.compile(tether.JsonSchema(schema, whitespace="compact"), BYTES)
    for instance in instances:
        text = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
        valid = validator.is_valid(instance)
        assert _accepts(compiled, text) == valid, text
        assert compiled.check(text).matches == valid, text
    if schema is ANY_ITEMS:  # equal strings, one escaped
        assert not _accepts(compiled, '["A","\\u0041"]')


def test_the_mask_refuses_exactly_the_tokens_that_repeat_an_item() -> None:
    compiled = tether.compile(tether.JsonSchema(ANY_ITEMS, whitespace="compact"), BYTES)
    matcher = compiled.matcher()
    matcher.consume_many(list(b'["ab",true,12,"a'))
    words = matcher.mask()
    assert bitmask.is_allowed(words, ord('"'))  # "a" is new
    assert bitmask.is_allowed(words, ord("b"))  # "ab…" may go on
    matcher.consume_many(list(b'b'))
    assert not bitmask.is_allowed(matcher.mask(), ord('"'))  # "ab" again
    assert bitmask.is_allowed(matcher.mask(), ord("c"))
    matcher.rollback(4)  # back to after 12
    words = matcher.mask()
    assert bitmask.is_allowed(words, ord(","))  # 12 is decided by the comma: new
    matcher.consume_many(list(b','))
    words = matcher.mask()
    assert not bitmask.is_allowed(words, ord("t"))  # true again, decided by its first byte
    assert bitmask.is_allowed(words, ord("f"))
    twin = matcher.fork()
    twin.consume_many(list(b'12'))
    assert not bitmask.is_allowed(twin.mask(), ord("]"))  # 12 again
    assert bitmask.is_allowed(twin.mask(), ord("3"))
    assert bitmask.is_allowed(matcher.mask(), ord("t")) is False  # the fork is separate


@pytest.mark.parametrize(("schema", "where"), [
    ({"anyOf": [{"type": "array", "uniqueItems": True},
                {"type": "array", "items": {"type": "integer"}}]}, "/anyOf/0/uniqueItems"),
    ({"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}, "uniqueItems": True}},
      "$ref": "#/$defs/t"}, "/$defs/t/uniqueItems"),
    ({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True},
     "/uniqueItems"),
])
def test_what_cannot_be_checked_exactly_is_refused(schema, where: str) -> None:
    with pytest.raises(CompileError) as err:
        tether.compile(tether.JsonSchema(schema), BYTES)
    assert err.value.location == where


def test_random_sessions_end_valid(smollm2_vocab) -> None:
    schema = {"type": "array", "items": {"type": ["integer", "boolean", "null"]},
              "uniqueItems": True, "minItems": 1}
    validator = jsonschema.Draft202012Validator(schema)
    compiled = tether.compile(tether.JsonSchema(schema), smollm2_vocab)
    for seed in range(6):
        session, stop = run_session(compiled, 48, seed)
        text = session.text()
        assert stop == "constraint_complete", (stop, text)
        assert validator.is_valid(json.loads(text)), text


def test_a_session_mask_is_the_filtered_mask(smollm2_vocab) -> None:
    compiled = tether.compile(tether.JsonSchema(TAGS), smollm2_vocab)
    session = Session(smollm2_vocab, compiled.matcher(), decider(smollm2_vocab, seed=0))
    for token in smollm2_vocab.segment(b'{"tags": ["x", "x'):
        session.advance(token)
    words = session.mask()
    closing = smollm2_vocab.segment(b'"')[0]
    assert not bitmask.is_allowed(words, closing)


LONG = {"type": "object", "properties": {
    "note": {"type": "string", "maxLength": 20_000},
    "lines": {"type": "array", "items": {"type": "string", "minLength": 1,
                                         "maxLength": 20_000}}}}


def test_long_strings_are_counted_in_code_points() -> None:
    compiled = tether.compile(tether.JsonSchema(LONG, whitespace="compact"), BYTES)
    validator = jsonschema.Draft202012Validator(LONG)
    for text in ["a" * 20_000, "a" * 20_001, "é" * 20_000, "é" * 20_001,
                 "\\n" * 20_000, "\\n" * 19_999 + "ab", ""]:
        for instance in ({"note": json.loads(f'"{text}"')},
                         {"lines": ["x", json.loads(f'"{text}"')]}):
            raw = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
            assert _accepts(compiled, raw) == validator.is_valid(instance), raw[:40]


def test_near_the_bound_the_mask_takes_out_tokens_too_long(smollm2_vocab) -> None:
    compiled = tether.compile(tether.JsonSchema(LONG), smollm2_vocab)
    matcher = compiled.matcher()
    matcher.consume_many(smollm2_vocab.segment(b'{"note": "' + b"a" * 19_998))
    words = matcher.mask()
    for piece, fits in [(b'"', True), (b"ab", True), (b'b"', True), (b"abc", False),
                        (b"ing", False), (b"\\n", True)]:
        token = smollm2_vocab.segment(piece)
        if len(token) == 1:
            assert bitmask.is_allowed(words, token[0]) == fits, piece
    grammar_only = compiled.inner.matcher()
    grammar_only.consume_many(smollm2_vocab.segment(b'{"note": "' + b"a" * 19_998))
    assert bitmask.popcount(words) < bitmask.popcount(grammar_only.mask())


@pytest.mark.parametrize(("schema", "where"), [
    ({"anyOf": [{"type": "string", "maxLength": 20_000}, {"type": "string", "maxLength": 30_000}]},
     "/anyOf/0/maxLength"),
    ({"type": "object", "propertyNames": {"maxLength": 20_000}}, "/propertyNames/maxLength"),
])
def test_long_strings_that_cannot_be_located_are_refused(schema, where: str) -> None:
    with pytest.raises(CompileError) as err:
        tether.compile(tether.JsonSchema(schema), BYTES)
    assert err.value.location == where


TITLES = {"type": "object", "patternProperties": {"^title_[a-z]{2}$": {"type": "integer"}},
          "additionalProperties": False}


def _keys_repeat(text: bytes) -> bool:
    repeated = []
    json.loads(text, object_pairs_hook=lambda pairs: repeated.extend(
        k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i])))
    return bool(repeated)


def test_distinct_keys_refuse_the_token_that_decides_a_repeated_key() -> None:
    compiled = tether.compile(tether.JsonSchema(TITLES, whitespace="compact",
                                                distinct_keys=True), BYTES)
    matcher = compiled.matcher()
    matcher.consume_many(list(b'{"title_id":1,"title_i'))
    assert not bitmask.is_allowed(matcher.mask(), ord("d"))  # then only a quote: decided
    assert bitmask.is_allowed(matcher.mask(), ord("e"))
    assert not compiled.check('{"title_id":1,"title_id":2}').matches
    assert compiled.check('{"title_id":1,"title_ie":2}').matches
    free = tether.compile(tether.JsonSchema({"type": "object"}, whitespace="compact",
                                            distinct_keys=True), BYTES)
    matcher = free.matcher()
    matcher.consume_many(list(b'{"a":{"a":1,"b":2},"ab":3,"a'))
    assert not bitmask.is_allowed(matcher.mask(), ord('"'))  # "a" again, at this level
    assert bitmask.is_allowed(matcher.mask(), ord("b")) and bitmask.is_allowed(
        matcher.mask(), ord("c"))  # "ab" may go on ("abc"); its quote is refused later
    matcher.consume_many(list(b'b'))
    assert not bitmask.is_allowed(matcher.mask(), ord('"'))
    spec = tether.compile(tether.JsonSchema(TITLES, whitespace="compact"), BYTES)
    assert spec.check('{"title_id":1,"title_id":2}').matches  # off: the schema's meaning


def test_generation_writes_no_key_twice(smollm2_vocab) -> None:
    """Random sessions under the generation policy (which turns distinct keys on), with
    SmolLM2's multi-byte tokens (a token may close a value and write the next key)."""
    from tether.session import compile_for_generation

    validator = jsonschema.Draft202012Validator(TITLES)
    for schema in (TITLES, {"type": "object", "additionalProperties": {"type": "integer"},
                            "minProperties": 2}):
        compiled = compile_for_generation(tether.JsonSchema(schema), smollm2_vocab)
        assert compiled.stats["distinct_keys"]
        for seed in range(6):
            session, stop = run_session(compiled, 96, seed)
            text = session.text().encode()
            assert stop == "constraint_complete", (stop, text)
            assert not _keys_repeat(text), text
            if schema is TITLES:
                assert validator.is_valid(json.loads(text)), text
