"""Budget-aware generation (docs/generation.md, "Budget").

* The bound is sound and exact on small automata: on a small vocabulary, for every
  state reachable within a few tokens and every budget, ``completes_within`` equals a
  brute-force search over token sequences, and ``completion_tokens`` is a real
  completion length (never below the true minimum).
* Sessions driven by random logits (which like to keep going), with budgets drawn
  between the shortest completion and three times it, always end accepted, never by the
  budget — over the regex corpus, the test grammars and JSON Schemas (a slice here;
  ``bench/budget_sweep.py`` runs 200 budgets each).
* A budget below the shortest completion is refused before generating.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from budget_runs import budget_runs
from regex_corpus import CORPUS

import tether
from tether.errors import BudgetTooSmall
from tether.session import Session

GRAMMARS = Path(__file__).parent / "grammars"
GLAIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "glaive"

# A small vocabulary with tokens of several lengths, so that token counts and byte
# counts differ.
SMALL_TOKENS = [bytes([b]) for b in b'abc012{}[]":, '] + [
    b"ab", b"abc", b"ca", b"00", b"012", b'{"', b'"}', b'":', b'", "', b"]]", b"[[", b"a,",
    b'"a"', b'{"a": ', b"0}"]
SMALL_VOCAB = tether.Vocabulary([*SMALL_TOKENS, b""], eos_ids=[len(SMALL_TOKENS)])

SMALL_CONSTRAINTS = [
    tether.Regex(r"(ab|c)*0{2,5}"),
    tether.Regex(r"a{3,7}(b|cc)"),
    tether.Regex(r"[abc]{0,4}[012]{2}"),
    tether.Choices(["abcabc", "0", "ca0", "abab0"]),
    tether.Grammar('root ::= "[" ( item ( "," item )* )? "]"\nitem ::= "a" | root', "gbnf"),
    tether.Grammar('root ::= x "0"\nx ::= "ab" x "c" | "c"', "gbnf"),
    tether.JsonSchema({"type": "object", "properties": {"a": {"type": "string",
                                                              "maxLength": 3}},
                       "required": ["a"]}, whitespace="compact"),
    tether.JsonSchema({"type": "array", "items": {"enum": [0, 1, 2]}, "minItems": 2},
                      whitespace="compact"),
]


def _brute_force(compiled, state: int, k: int, memo: dict) -> bool:
    """Whether some sequence of at most ``k`` tokens takes ``state`` to acceptance."""
    if compiled.dfa.accepting[state]:
        return True
    if k == 0:
        return False
    key = (state, k)
    if key not in memo:
        memo[key] = False
        for token in range(len(SMALL_TOKENS)):
            nxt = compiled.dfa.walk(state, SMALL_TOKENS[token])
            if nxt != 0 and _brute_force(compiled, nxt, k - 1, memo):
                memo[key] = True
                break
    return memo[key]


def _min_tokens(compiled, state: int, limit: int = 12) -> int | None:
    memo: dict = {}
    return next((k for k in range(limit + 1) if _brute_force(compiled, state, k, memo)), None)


@pytest.mark.parametrize("constraint", SMALL_CONSTRAINTS, ids=repr)
def test_bound_is_exact_on_small_automata(constraint) -> None:
    compiled = tether.compile(constraint, SMALL_VOCAB)
    start = compiled.matcher().state
    states, frontier = {start}, [start]
    for _ in range(4):  # every state within four tokens
        nxt = []
        for s in frontier:
            for token in SMALL_TOKENS:
                t = compiled.dfa.walk(s, token)
                if t != 0 and t not in states:
                    states.add(t)
                    nxt.append(t)
        frontier = nxt
    memo: dict = {}
    for state in states:
        exact = _min_tokens(compiled, state)
        if exact is None:  # no completion in this vocabulary (``100`` of ``100e-2``: no e)
            assert not any(compiled.completes_within(state, k) for k in range(8)), state
            continue
        assert compiled.completion_tokens(state) >= exact
        for k in range(exact + 3):
            assert compiled.completes_within(state, k) == _brute_force(compiled, state, k,
                                                                       memo), (state, k)


@pytest.mark.parametrize("constraint", SMALL_CONSTRAINTS, ids=repr)
def test_budget_masks_keep_exactly_the_tokens_that_fit(constraint) -> None:
    """A budget mask (a parser's skips its walk when every token surely fits) keeps a
    token iff the state it leads to completes within the budget."""
    compiled = tether.compile(constraint, SMALL_VOCAB)
    states, frontier = {compiled.matcher().state}, [compiled.matcher().state]
    for _ in range(3):
        frontier = [t for s in frontier for token in SMALL_TOKENS
                    if (t := compiled.dfa.walk(s, token)) != 0 and t not in states
                    and not states.add(t)]
    for state in states:
        allowed = tether.engine.bitmask.to_ids(compiled.state_mask(state), SMALL_VOCAB.size)
        for k in range(6):
            fit = [t for t in allowed.tolist() if SMALL_VOCAB.is_eos(t) or
                   compiled.completes_within(compiled.dfa.walk(state, SMALL_TOKENS[t]), k)]
            kept = tether.engine.bitmask.to_ids(compiled.budget_mask(state, k),
                                                SMALL_VOCAB.size)
            assert kept.tolist() == fit, (state, k)


def _check_runs(vocab, constraint, budgets: int, seed: int = 0) -> None:
    compiled = tether.compile(constraint, vocab)
    for budget, session, stop in budget_runs(compiled, budgets, seed):
        assert stop in ("constraint_complete", "eog"), (constraint, budget, session.text())
        assert len(session.tokens) <= budget
        assert compiled.check(b"".join(vocab.token_bytes(t) for t in session.tokens)).matches


@pytest.mark.parametrize("pattern", [p for p, _ in CORPUS[::4]])
def test_runs_end_accepted_regex(smollm2_vocab, pattern: str) -> None:
    _check_runs(smollm2_vocab, tether.Regex(pattern), budgets=3)


@pytest.mark.parametrize("name", ["json.gbnf", "arithmetic.lark", "sql_select.lark",
                                  "c_like.gbnf"])
def test_runs_end_accepted_grammar(smollm2_vocab, name: str) -> None:
    syntax = "lark" if name.endswith(".lark") else "gbnf"
    _check_runs(smollm2_vocab, tether.Grammar((GRAMMARS / name).read_text(), syntax=syntax),
                budgets=3)


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "tags": {
        "type": "array", "items": {"type": "string"}, "minItems": 2}},
     "required": ["name", "tags"]},
    {"type": "object", "properties": {"point": {"$ref": "#/$defs/p"}, "n": {"type": "number"}},
     "required": ["point"], "$defs": {"p": {"type": "object", "properties": {
         "x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"]}}},
    {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"a": {"type": "boolean"}},
                                  "required": ["a"]}]},
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
     "required": ["b"], "additionalProperties": {"type": "integer"}},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: json.dumps(s)[:40])
@pytest.mark.parametrize("order", ["schema", "any"])
def test_runs_end_accepted_schema(smollm2_vocab, schema, order: str) -> None:
    _check_runs(smollm2_vocab, tether.JsonSchema(schema, property_order=order), budgets=3)


@pytest.mark.parametrize("constraint", [
    *(tether.JsonSchema(s, property_order=o) for s in SCHEMAS for o in ("schema", "any")),
    tether.Grammar((GRAMMARS / "json.gbnf").read_text(), syntax="gbnf"),
    tether.grammars.python(fenced=True)], ids=repr)
def test_completion_paths_complete(smollm2_vocab, constraint) -> None:
    """Along random walks, each state's completion path takes the matcher to acceptance
    (paths are composed from shortest strings kept per NFA state as the walks meet them,
    in whatever order), and ``completion_tokens`` is at most its length (less where a
    previous state's path was credited)."""
    compiled = tether.compile(constraint, smollm2_vocab)
    rng = np.random.default_rng(0)
    for _ in range(6):
        matcher = compiled.matcher()
        for _ in range(int(rng.integers(1, 40))):
            state = matcher.state
            path = compiled._completion_path(state)
            assert path is not None and compiled.completion_tokens(state) <= len(path)
            twin = matcher.fork()
            twin.consume_many(path)
            assert twin.is_accepting(), (matcher.generated_bytes, path)
            allowed = tether.engine.bitmask.to_ids(matcher.mask() & ~compiled._eos_words,
                                                   smollm2_vocab.size)
            if not allowed.size:
                break
            matcher.consume(int(rng.choice(allowed)))


@pytest.mark.parametrize("text", ["x = a if b", "x = a if", "x = [a for b",
                                  "def f(n: int) -> int:\n    return n and not n if n"])
def test_completions_respect_names_matched_longest(smollm2_vocab, text: str) -> None:
    """Python's names are matched longest, which the grammar's distances do not count:
    the shortest completion they spell after ``x = a if b`` is ``elseA`` — one name, not
    ``else A``. The budget's completions must accept all the same (a path that did not
    once credited a later state with 0 tokens, and a run ended cut by the budget)."""
    compiled = tether.compile(tether.grammars.python(fenced=True), smollm2_vocab)
    matcher = compiled.matcher()
    matcher.consume_many(smollm2_vocab.segment(f"```python\n{text}".encode()))
    state = matcher.state
    path = compiled._completion_path(state)
    twin = matcher.fork()
    twin.consume_many(path)
    assert twin.is_accepting(), path
    for k in range(len(path)):
        assert not matcher.completes_within(k) or any(
            matcher.completes_after(t, k - 1) for t in bitmask_ids(matcher, smollm2_vocab))
    budget = len(path)
    while not matcher.is_accepting():  # the budget's own narrowing reaches the end
        allowed = bitmask_ids(matcher, smollm2_vocab, matcher.budget_mask(budget - 1))
        assert allowed.size, matcher.generated_bytes
        matcher.consume(int(allowed[0]))
        budget -= 1
        assert budget >= 0


def bitmask_ids(matcher, vocab, words=None):
    words = matcher.mask() if words is None else words
    eos = tether.engine.bitmask.from_ids(sorted(vocab.eos_ids), vocab.size)
    return tether.engine.bitmask.to_ids(words & ~eos, vocab.size)


@pytest.mark.skipif(not GLAIVE.is_dir(), reason="needs ../shared/data/glaive")
def test_runs_end_accepted_function_call_schemas(smollm2_vocab) -> None:
    from tether.session import generation_constraint

    for path in sorted(GLAIVE.glob("*.json"))[::40]:
        constraint = generation_constraint(tether.JsonSchema(json.loads(path.read_text())))
        _check_runs(smollm2_vocab, constraint, budgets=2)


def test_budget_below_the_shortest_completion_is_refused(smollm2_vocab) -> None:
    compiled = tether.compile(tether.Regex(r"\d{4}-\d{2}-\d{2}"), smollm2_vocab)
    assert compiled.matcher().completion_tokens() == 10  # SmolLM2 spells digits one by one
    with pytest.raises(BudgetTooSmall) as info:
        Session(smollm2_vocab, compiled.matcher(), max_tokens=9)
    assert info.value.needed == 10
    Session(smollm2_vocab, compiled.matcher(), max_tokens=10)  # just enough


def test_mask_narrows_to_closing_tokens(smollm2_vocab) -> None:
    """Near the end of the budget the mask keeps only tokens after which the rest fits."""
    compiled = tether.compile(tether.Regex(r'"[a-z]{1,40}"'), smollm2_vocab)
    session = Session(smollm2_vocab, compiled.matcher(), max_tokens=3)
    session.advance(smollm2_vocab.segment(b'"')[0])
    session.advance(smollm2_vocab.segment(b"abc")[0])
    allowed = tether.engine.bitmask.to_ids(session.mask(), smollm2_vocab.size).tolist()
    assert allowed and all(smollm2_vocab.token_bytes(t).endswith(b'"') for t in allowed)


def test_a_step_whose_allowed_tokens_all_misfit_still_decides(monkeypatch) -> None:
    """When every allowed token is refused by the budget's check (fused hard domains can
    leave only such tokens: the check counts Syntax and the settlement of owed names),
    the step goes on to the budget's mask and its relaxations — the rejections never
    leave the decider an empty mask (HumanEval/54 under full_hard ended in
    NoLegalContinuation)."""
    from tether.session import decider

    compiled = tether.compile(tether.Regex(r"(ab|c)*0{2,5}"), SMALL_VOCAB)
    session = Session(SMALL_VOCAB, compiled.matcher(), decider(SMALL_VOCAB, seed=0),
                      max_tokens=12)
    monkeypatch.setattr(session, "_fits", lambda token: False)
    session.decide(np.zeros(SMALL_VOCAB.size, dtype=np.float32))
    assert len(session.tokens) == 1
