"""The pushdown engine (tether.engine.pda) on grammars built directly in the IR.

Languages are checked against independent recognisers written here (a bracket stack,
``json``), masks against a brute-force oracle over a small vocabulary of every short
string, and the bounds against grammars made to exceed them.
"""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tether
from tether.automata.dfa import DEAD
from tether.automata.regex_ast import EMPTY, Alternate, Concat, Repeat, literal
from tether.automata.regex_parser import parse_regex
from tether.compiler import to_automaton
from tether.engine import bitmask
from tether.engine.pda import MAX_STACK_DEPTH, PushdownAutomaton
from tether.engine.pushdown import PushdownCompiled
from tether.engine.regular import RegularCompiled
from tether.errors import CompileError, LimitExceeded
from tether.grammar.ir import Grammar, Ref

# s: "(" s ")" s | "[" s "]" s | "x" s | ""   — two kinds of brackets, balanced
DYCK = Grammar({"s": Alternate((
    Concat((literal("("), Ref("s"), literal(")"), Ref("s"))),
    Concat((literal("["), Ref("s"), literal("]"), Ref("s"))),
    Concat((literal("x"), Ref("s"))),
    EMPTY))}, "s")


def dyck_prefix(text: str) -> tuple[bool, bool]:
    """(is a prefix of a balanced string, is balanced) by an explicit stack."""
    stack: list[str] = []
    for ch in text:
        if ch in "([":
            stack.append(ch)
        elif ch in ")]" and (not stack or stack.pop() != "([)]"["([)]".index(ch) - 2]):
            return False, False
    return True, not stack


def accepts(automaton, text: str) -> tuple[bool, bool]:
    state = automaton.walk(automaton.start, text.encode())
    return state != DEAD, state != DEAD and bool(automaton.accepting[state])


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="()[]x", max_size=24))
def test_dyck_language_matches_a_stack(text: str) -> None:
    automaton = to_automaton(DYCK)
    assert isinstance(automaton, PushdownAutomaton)
    assert accepts(automaton, text) == dyck_prefix(text)


@pytest.mark.parametrize("engine", [RegularCompiled, PushdownCompiled])
def test_dyck_masks_equal_brute_force_oracle(engine) -> None:
    """Masks walked whole (RegularCompiled) and composed per frame (PushdownCompiled)
    both equal the oracle."""
    tokens = ["".join(p) for n in (1, 2, 3) for p in itertools.product("()[]x", repeat=n)]
    vocab = tether.Vocabulary([t.encode() for t in tokens] + [b""], eos_ids=[len(tokens)])
    compiled = engine(None, vocab, to_automaton(DYCK))
    rng = random.Random(7)
    checked = 0
    for _ in range(60):
        matcher = compiled.matcher()
        text = ""
        for _ in range(rng.randint(1, 12)):
            allowed = set(bitmask.to_ids(matcher.mask(), vocab.size).tolist())
            oracle = {i for i, t in enumerate(tokens) if dyck_prefix(text + t)[0]}
            if dyck_prefix(text)[1]:
                oracle.add(len(tokens))
            assert allowed == oracle, text
            checked += 1
            choice = rng.choice(sorted(allowed - {len(tokens)}))
            matcher.consume(choice)
            text += tokens[choice]
    assert checked > 300


def _json_grammar() -> Grammar:
    ws = parse_regex(r"[ \n]*")
    string = parse_regex(r'"[^"\\]*"')

    def seq_of(item: str, open_: str, close: str):
        more = Repeat(Concat((ws, literal(","), ws, Ref(item))), 0, None)
        return Concat((literal(open_), ws, Alternate((
            literal(close), Concat((Ref(item), more, ws, literal(close)))))))

    return Grammar({
        "value": Alternate((Ref("object"), Ref("array"), string,
                            parse_regex(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"), literal("true"),
                            literal("null"))),
        "object": seq_of("member", "{", "}"),
        "member": Concat((string, ws, literal(":"), ws, Ref("value"))),
        "array": seq_of("value", "[", "]"),
    }, "value")


def _random_json(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth > 5 or r < 0.3:
        return rng.choice(["1", "-2.5", '"x"', "true", "null", '"a b"'])
    if r < 0.65:
        return "[" + ", ".join(_random_json(rng, depth + 1)
                               for _ in range(rng.randint(0, 3))) + "]"
    return "{" + ", ".join(f'"k{i}": ' + _random_json(rng, depth + 1)
                           for i in range(rng.randint(0, 3))) + "}"


def test_json_grammar_accepts_json_and_rejects_mutations() -> None:
    automaton = to_automaton(_json_grammar())
    rng = random.Random(3)
    for _ in range(300):
        text = _random_json(rng)
        assert accepts(automaton, text) == (True, True), text
        i = rng.randrange(len(text))
        mutated = text[:i] + rng.choice("{}[],:\"1x ") + text[i + 1:]
        try:
            json.loads(mutated)
            valid = True
        except json.JSONDecodeError:
            valid = False
        assert accepts(automaton, mutated)[1] is valid, mutated


def test_direct_left_recursion_is_rewritten() -> None:
    grammar = Grammar({
        "list": Alternate((Concat((Ref("list"), literal(","), Ref("item"))), Ref("item"))),
        "item": Alternate((literal("a"), Concat((literal("("), Ref("list"), literal(")"))))),
    }, "list")
    automaton = to_automaton(grammar)
    for text, ok in [("a", True), ("a,a,a", True), ("(a,(a)),a", True), ("a,", False),
                     (",a", False), ("(a", False)]:
        assert accepts(automaton, text)[1] is ok, text


def test_ambiguous_grammar_is_exact() -> None:
    # e: e "+" e | e "*" e | "a" | "(" e ")"  — highly ambiguous
    grammar = Grammar({"e": Alternate((
        Concat((Ref("e"), literal("+"), Ref("e"))),
        Concat((Ref("e"), literal("*"), Ref("e"))),
        literal("a"),
        Concat((literal("("), Ref("e"), literal(")")))))}, "e")
    automaton = to_automaton(grammar)
    expr = "+".join(["a*(a+a)"] * 30)
    assert accepts(automaton, expr) == (True, True)
    assert accepts(automaton, expr + "+") == (True, False)
    assert accepts(automaton, expr + ")")[0] is False


def test_indirect_left_recursion_is_refused_with_the_cycle() -> None:
    grammar = Grammar({"a": Alternate((Concat((Ref("b"), literal("x"))), literal("y"))),
                       "b": Concat((Ref("a"), literal("z")))}, "a", where={"a": "1:1"})
    with pytest.raises(CompileError, match="a -> b -> a"):
        to_automaton(grammar)


def test_nesting_deeper_than_the_bound_is_a_clear_error() -> None:
    automaton = to_automaton(DYCK)
    state = automaton.walk(automaton.start, b"(" * 100)
    assert state != DEAD
    with pytest.raises(LimitExceeded, match="deeper"):
        automaton.walk(state, b"(" * MAX_STACK_DEPTH)


def test_right_recursion_runs_in_constant_depth() -> None:
    # s: "x" s | ""  — a tail call: the stack must not grow with the input.
    automaton = to_automaton(Grammar({"s": Alternate((Concat((literal("x"), Ref("s"))),
                                                      EMPTY))}, "s"))
    state = automaton.walk(automaton.start, b"x" * (3 * MAX_STACK_DEPTH))
    assert automaton.accepting[state]
    assert automaton.n_states < 10


def test_undefined_and_unproductive_rules_are_errors() -> None:
    with pytest.raises(CompileError, match="undefined rule 'nope'"):
        to_automaton(Grammar({"s": Concat((literal("a"), Ref("nope", "2:5")))}, "s"))
    with pytest.raises(CompileError, match="derives no string"):
        to_automaton(Grammar({"s": Concat((literal("a"), Ref("s")))}, "s"))
