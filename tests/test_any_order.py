"""Object properties in any order (``property_order="any"``, the default): AnyOrder groups
that the pushdown engine builds lazily, one rule per reached state.

The languages are checked exactly: every sequence of keys (permutations, subsets,
duplicates, undeclared keys) against the ``jsonschema`` validator, prefixes against
viability, masks against a brute-force walk of every token; and a 40-property object
must build only the states its texts reach.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import time
from pathlib import Path

import jsonschema
import pytest

import tether
from tether.automata.dfa import DEAD
from tether.automata.regex_ast import literal
from tether.compiler import to_automaton
from tether.engine.pda import PushdownAutomaton
from tether.errors import CompileError
from tether.grammar.ir import AnyOrder, Grammar, Ref
from tether.schema import compile_schema

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _maskbench_method import DATA_DIR  # noqa: E402

TOKENS = ([bytes([b]) for b in range(32, 127)] + [b"\n"]
          + [b'", "', b'": ', b'{"', b'"}', b', "', b'": 1', b'1, "', b'": "', b'", ',
             b'"a', b'a"', b'p1', b'p2', b'"p', b'": null', b'null', b'true', b'}', b''])
VOCAB = tether.Vocabulary(TOKENS, eos_ids=[len(TOKENS) - 1], name="any-order")
VALUES = {"a": 1, "b": "s", "c": None, "d": True, "x": 2, "y": "t"}


def compiled(schema, **options):
    return tether.compile(tether.JsonSchema(schema, **options), VOCAB)


def object_text(keys) -> str:
    """The object with these keys in this order (duplicates kept), as MaskBench writes it."""
    members = [f"{json.dumps(k)}: {json.dumps(VALUES[k])}" for k in keys]
    return "{" + ", ".join(members) + "}"


def expected(schema, keys) -> bool:
    """The validator's verdict. A declared property (in ``properties`` or ``required``)
    written twice is rejected; an undeclared key may repeat (it cannot be told apart from
    the others without remembering every key; a JSON parser keeps the last value), and
    min/maxProperties then count the members as written."""
    declared = set(schema.get("properties", {})) | set(schema.get("required", []))
    written = [k for k in keys if k in declared]
    if len(set(written)) != len(written):
        return False
    if len(set(keys)) != len(keys):
        lo, hi = schema.get("minProperties", 0), schema.get("maxProperties", len(keys))
        if not lo <= len(keys) <= hi:
            return False
        schema = {k: v for k, v in schema.items() if k not in ("minProperties", "maxProperties")}
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema).is_valid({k: VALUES[k] for k in keys})


SCHEMAS = {
    "closed, two required": {
        "type": "object", "properties": {"a": {}, "b": {}, "c": {}},
        "required": ["c", "a"], "additionalProperties": False},
    "open, typed extras": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"},
                       "d": {"type": "boolean"}},
        "required": ["b"], "additionalProperties": {"type": "integer"}},
    "min/max properties": {
        "type": "object", "properties": {"a": {}, "b": {}, "c": {}},
        "minProperties": 2, "maxProperties": 3},
    "min properties, closed": {
        "type": "object", "properties": {"a": {}, "b": {}, "c": {}, "d": {}},
        "required": ["d"], "minProperties": 3, "additionalProperties": False},
    "max properties, pattern keys": {
        "type": "object", "properties": {"a": {}, "b": {}},
        "patternProperties": {"^[xy]$": {"type": ["integer", "string"]}},
        "required": ["a"], "maxProperties": 2, "additionalProperties": False},
    "required not declared": {
        "type": "object", "properties": {"a": {"type": "integer"}},
        "required": ["a", "x"], "additionalProperties": {"type": "integer"}},
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_every_key_sequence_against_jsonschema(name: str) -> None:
    schema = SCHEMAS[name]
    c = compiled(schema)
    checked = 0
    for n in range(5):
        for keys in itertools.product("abcdxy", repeat=n):
            text = object_text(keys)
            assert c.check(text).matches == expected(schema, keys), (name, text)
            checked += 1
    assert checked == sum(6 ** n for n in range(5))


def test_duplicates_and_missing_required_are_rejected() -> None:
    c = compiled(SCHEMAS["closed, two required"])
    assert c.check('{"c": null, "b": "s", "a": 1}').matches
    assert c.check('{"b": "s", "c": null, "a": 1}').matches
    result = c.check('{"c": null, "a": 1, "c": null}')
    assert not result.matches
    assert result.valid_prefix == len('{"c": null, "a": 1, "')  # only "b" may come
    assert not c.check('{"a": 1, "b": "s"}').matches  # "c" is required
    assert not c.check('{"a": 1, "a": 1}').matches


def test_schema_order_is_still_available() -> None:
    schema = SCHEMAS["closed, two required"]
    c = compiled(schema, property_order="schema")
    assert c.check('{"a": 1, "b": "s", "c": null}').matches
    assert c.check('{"c": null, "a": 1, "b": "s"}').matches  # required first, as listed
    assert not c.check('{"b": "s", "a": 1, "c": null}').matches
    with pytest.raises(CompileError, match="minProperties/maxProperties"):
        compiled(SCHEMAS["min/max properties"], property_order="schema")
    assert tether.JsonSchema(schema).property_order == "any"


def _viable(aut, data: bytes) -> bool:
    return aut.walk(aut.start, data) != DEAD


def _walk_with_exact_masks(c, aut, text: str) -> None:
    """Consume ``text`` token by token; every mask must be exactly the tokens that keep
    the text viable (a brute-force walk of the vocabulary)."""
    from mask_walk import greedy_tokens

    matcher = c.matcher()
    done = b""
    for token in greedy_tokens(VOCAB, text.encode()):
        brute = {i for i, t in enumerate(TOKENS) if t and _viable(aut, done + t)}
        allowed = {i for i in range(len(TOKENS) - 1) if matcher.allowed(i)}
        assert allowed == brute, (text, done)
        matcher.consume(token)
        done += TOKENS[token]
    assert matcher.is_accepting() and matcher.eos_allowed(), text


def test_forty_optional_properties_build_lazily() -> None:
    names = [f"p{k}" for k in range(40)]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names},
              "required": ["p7", "p31"], "additionalProperties": False}
    started = time.perf_counter()
    c = compiled(schema)
    assert time.perf_counter() - started < 5.0
    aut = to_automaton(compile_schema(tether.JsonSchema(schema)), pushdown=True)
    rng = random.Random(3)
    texts = ['{"p7": 1, "p31": 2}', '{"p31": 2, "p7": 1}']
    for _ in range(4):
        keys = rng.sample(names, rng.randint(2, 40))
        keys += [k for k in ("p7", "p31") if k not in keys]
        rng.shuffle(keys)
        texts.append("{" + ", ".join(f'"{k}": {i}' for i, k in enumerate(keys)) + "}")
    for text in texts:
        assert c.check(text).matches, text
        _walk_with_exact_masks(c, aut, text)
    # Only reached states were built: about one per member written, never 2^40.
    # (The brute-force masks also end members the texts do not write: a few more.)
    built = sum(1 for r in range(aut._n_static, len(aut._rule_start)) if aut._rule_start[r] >= 0)
    assert built <= 2 * sum(t.count(":") for t in texts)
    assert len(aut._group_states) <= 41 * built
    assert not c.check('{"p7": 1, "p31": 2, "p7": 3}').matches
    assert not c.check('{"p7": 1, "p0": 2}').matches
    assert not c.check('{"p7": 1, "p31": 2, "q": 3}').matches


def test_group_masks_are_exact_on_small_objects() -> None:
    for name in ("closed, two required", "min/max properties", "open, typed extras"):
        schema = SCHEMAS[name]
        c = compiled(schema)
        aut = to_automaton(compile_schema(tether.JsonSchema(schema)), pushdown=True)
        for keys in itertools.permutations("abcd", 3):
            if expected(schema, keys):
                _walk_with_exact_masks(c, aut, object_text(keys))


def test_errors_name_the_object() -> None:
    c = compiled({"type": "object", "properties": {"a": {}, "b": {}},
                  "additionalProperties": False})
    result = c.check('{"a": 1, "a"')
    assert not result.matches and result.expected == b"b"
    assert any(where.endswith("(/properties/b)") for where in result.context), result


# -- the IR node itself -------------------------------------------------------------------
def _group_oracle(parts: list[str], required, extra: bool, lo: int, hi) -> bool:
    declared = [p for p in parts if p != "x"]
    if not extra and "x" in parts or len(set(declared)) != len(declared):
        return False
    if any(r and name not in declared for name, r in zip("abcd", required, strict=False)):
        return False
    return lo <= len(parts) and (hi is None or len(parts) <= hi)


@pytest.mark.parametrize(("lo", "hi"), [(0, None), (1, None), (3, None), (0, 2), (2, 3),
                                        (4, 4)])
def test_group_language_and_prefixes_are_exact(lo: int, hi) -> None:
    for required in [(False,) * 4, (True, False, False, False), (True, True, False, True)]:
        for extra in (False, True):
            group = AnyOrder(tuple(literal(c) for c in "abcd"), required,
                             literal("x") if extra else None, literal(","), lo, hi)
            texts = [",".join(p) for n in range(7) for p in itertools.product("abcdx", repeat=n)]
            valid = {t for t in texts if _group_oracle(t.split(",") if t else [], required,
                                                        extra, lo, hi)}
            if not valid:
                with pytest.raises(CompileError):
                    to_automaton(Grammar({"start": group}, "start"))
                continue
            aut = to_automaton(Grammar({"start": group}, "start"))
            assert isinstance(aut, PushdownAutomaton)
            prefixes = {t[:i] for t in valid for i in range(len(t) + 1)}
            for t in texts:
                state = aut.walk(aut.start, t.encode())
                assert (state != DEAD and bool(aut.accepting[state])) == (t in valid), t
                if len(t) <= 5:
                    assert (state != DEAD) == (t in prefixes), t


def test_group_inside_a_recursive_grammar() -> None:
    # open: "(" any order of {"a=" item, "b"} ")"; item: "0" | open — nesting through a group
    g = Grammar({
        "start": Ref("v"),
        "v": Ref("open"),
        "open": _concat(literal("("),
                        AnyOrder((_concat(literal("a="), Ref("item")), literal("b")),
                                 (True, False), None, literal(","), 1, None),
                        literal(")")),
        "item": _alt(literal("0"), Ref("open")),
    }, "start")
    aut = to_automaton(g)
    for text, ok in [("(a=0)", True), ("(b,a=0)", True), ("(a=(b,a=0),b)", True),
                     ("(b)", False), ("(a=0,a=0)", False), ("(a=(a=(a=0)),b)", True)]:
        state = aut.walk(aut.start, text.encode())
        assert (state != DEAD and bool(aut.accepting[state])) == ok, text


def test_group_refusals() -> None:
    nullable_member = AnyOrder((literal("a"), _opt(literal("b"))), (False, False), None,
                               literal(","))
    with pytest.raises(CompileError, match="empty string"):
        to_automaton(Grammar({"start": nullable_member}, "start"))
    left = Grammar({"start": AnyOrder((Ref("start"), literal("b")), (False, True), None,
                                      literal(",")),
                    }, "start")
    with pytest.raises(CompileError, match="left recursion"):
        to_automaton(left)


def _concat(*items):
    from tether.automata.regex_ast import Concat

    return Concat(tuple(items))


def _alt(*items):
    from tether.automata.regex_ast import Alternate

    return Alternate(tuple(items))


def _opt(item):
    from tether.automata.regex_ast import Repeat

    return Repeat(item, 0, 1)


# -- MaskBench instances written out of schema order -----------------------------------
OUT_OF_ORDER = ["Github_medium---o55359.json", "Github_hard---o29388.json",
                "Github_hard---o58218.json", "Github_hard---o81160.json",
                "Kubernetes---kb_105_Normalized.json"]


@pytest.mark.parametrize("name", OUT_OF_ORDER)
def test_maskbench_out_of_order_instances(name: str) -> None:
    path = DATA_DIR / name
    if not path.is_file():
        pytest.skip(f"no MaskBench data in {DATA_DIR}")
    data = json.loads(path.read_text())
    c = compiled(data["schema"])
    for i, test in enumerate(data["tests"]):
        text = json.dumps(test["data"], ensure_ascii=False)
        assert c.check(text).matches == test["valid"], (name, i)
