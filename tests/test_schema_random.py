"""Random schemas against the ``jsonschema`` validator (hypothesis).

Schemas come from a small generator of keyword combinations, instances from a small
value generator (keys a–d, short strings, small numbers). Soundness: every instance the
compiled language accepts validates. Completeness, where the property-order policy
cannot matter (no allOf/oneOf/not/if merging objects, keys sorted like the schema's):
every valid instance is accepted.
"""

from __future__ import annotations

import json

import jsonschema
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tether
from tether.automata.dfa import DEAD
from tether.compiler import to_automaton
from tether.errors import CompileError
from tether.schema import compile_schema

KEYS = ("a", "b", "c", "d")
PATTERNS = ("^a", "b", "^[a-c]*$", "x|y")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-6, 6),
    st.sampled_from([0.5, -1.5, 2.0]),
    st.text(alphabet="abxy\"\\é", max_size=4))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=3).map(
            lambda d: dict(sorted(d.items())))),
    max_leaves=6)


def _leaf() -> st.SearchStrategy[dict]:
    integer = st.fixed_dictionaries({"type": st.just("integer")}, optional={
        "minimum": st.integers(-4, 2), "maximum": st.integers(-2, 4)})
    string = st.fixed_dictionaries({"type": st.just("string")}, optional={
        "minLength": st.integers(0, 2), "maxLength": st.integers(0, 3),
        "pattern": st.sampled_from(PATTERNS)})
    return st.one_of(
        integer, string,
        st.sampled_from([{"type": "boolean"}, {"type": "null"}, {"type": "number"}, {}]),
        st.lists(scalars, min_size=1, max_size=3).map(lambda v: {"enum": v}),
        scalars.map(lambda v: {"const": v}))


def _composite(inner: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
    props = st.dictionaries(st.sampled_from(KEYS), inner, max_size=3).map(
        lambda d: dict(sorted(d.items())))
    obj = st.builds(
        lambda p, req, extra: {"type": "object", "properties": p,
                               "required": sorted(k for k in p if k in req),
                               **({} if extra is None else {"additionalProperties": extra})},
        props, st.sets(st.sampled_from(KEYS)), st.one_of(st.none(), st.booleans(), inner))
    arr = st.builds(
        lambda items, lo, hi: {"type": "array", "items": items,
                               **({} if lo is None else {"minItems": lo}),
                               **({} if hi is None else {"maxItems": hi})},
        inner, st.one_of(st.none(), st.integers(0, 2)), st.one_of(st.none(), st.integers(0, 3)))
    pair = st.lists(inner, min_size=2, max_size=2)
    return st.one_of(
        obj, arr,
        pair.map(lambda p: {"anyOf": p}), pair.map(lambda p: {"allOf": p}),
        pair.map(lambda p: {"oneOf": p}), inner.map(lambda s: {"not": s}),
        st.tuples(inner, inner, inner).map(lambda t: {"if": t[0], "then": t[1], "else": t[2]}))


schemas = st.recursive(_leaf(), _composite, max_leaves=5)


def _order_free(schema) -> bool:
    text = json.dumps(schema)
    return not any(f'"{k}"' in text for k in ("allOf", "oneOf", "not", "if"))


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(schemas, st.lists(values, min_size=1, max_size=8))
def test_random_schemas_agree_with_jsonschema(schema, instances) -> None:
    try:
        grammar = compile_schema(tether.JsonSchema(schema))
    except CompileError:
        assume(False)
    aut = to_automaton(grammar)
    validator = jsonschema.Draft202012Validator(schema)
    complete = _order_free(schema)
    for data in instances:
        text = json.dumps(data, ensure_ascii=False)
        state = aut.walk(aut.start, text.encode())
        accepted = state != DEAD and bool(aut.accepting[state])
        if accepted:
            assert validator.is_valid(data), (schema, text)
        elif complete:
            assert not validator.is_valid(data), (schema, text)
