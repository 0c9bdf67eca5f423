"""Rules that derive the same strings by construction are made one before the pushdown
engine builds them (tether.grammar.lower.merge_equal_rules): aliases and rules with the
same body go, references follow, the language stays."""

from __future__ import annotations

import itertools

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tether.automata.dfa import DEAD
from tether.automata.regex_ast import EMPTY, Alternate, CharSet, Concat, Repeat, literal
from tether.engine.pda import PushdownAutomaton
from tether.errors import CompileError
from tether.grammar.ir import AnyOrder, Grammar, Ref, refs_in
from tether.grammar.lower import check_grammar, merge_equal_rules


def _names(grammar: Grammar) -> set[str]:
    return set(grammar.rules)


def test_aliases_and_copies_become_one_rule() -> None:
    grammar = Grammar({
        "start": Concat((Ref("a"), Ref("b"), Ref("c"))),
        "a": Concat((literal("x", 3), Ref("d"))),
        "b": Concat((literal("x", 9), Ref("d"))),  # a's body at another position
        "c": Ref("e"),  # an alias
        "e": literal("y"),
        "d": literal("z"),
    }, "start", where={"a": "/a", "b": "/b"})
    merged = merge_equal_rules(grammar)
    assert _names(merged) == {"start", "a", "d", "e"}
    assert [r.name for r in refs_in(merged.rules["start"])] == ["a", "a", "e"]
    assert merged.where["a"] == "/a"


def test_rules_equal_once_their_references_are_merged_merge_in_a_later_round() -> None:
    # l1 and l2 differ only in naming v and w; v and w are the same: merged first, then l1, l2
    grammar = Grammar({
        "start": Alternate((Ref("l1"), Ref("l2"))),
        "l1": Concat((literal("["), Ref("v"), literal("]"))),
        "l2": Concat((literal("["), Ref("w"), literal("]"))),
        "v": Alternate((literal("a"), Ref("l1"))),
        "w": Alternate((literal("a"), Ref("l1"))),
    }, "start")
    merged = merge_equal_rules(grammar)
    assert _names(merged) == {"start", "l1", "v"}
    assert [r.name for r in refs_in(merged.rules["start"])] == ["l1", "l1"]


def test_the_start_rule_and_rules_matched_longest_stay() -> None:
    grammar = Grammar({
        "start": Ref("a"),  # the start rule is kept even as an alias
        "a": Concat((Ref("n"), Ref("m"))),
        "n": Repeat(CharSet(((97, 122),)), 1, None),
        "m": Repeat(CharSet(((97, 122),)), 1, None),  # n's body, but matched longest
    }, "start", longest=frozenset({"m"}))
    merged = merge_equal_rules(grammar)
    assert _names(merged) == {"start", "a", "n", "m"}
    assert merge_equal_rules(Grammar({"s": literal("x")}, "s")).rules.keys() == {"s"}


def test_groups_members_follow_the_merge() -> None:
    group = AnyOrder((Ref("p"), Ref("q")), (True, False), None, literal(","))
    grammar = Grammar({"start": Concat((literal("{"), group, literal("}"))),
                       "p": Ref("v"), "q": Ref("w"),
                       "v": literal("1"), "w": literal("1")}, "start")
    merged = merge_equal_rules(grammar)
    body = merged.rules["start"]
    assert isinstance(body, Concat) and isinstance(body.items[1], AnyOrder)
    assert [m.name for m in body.items[1].members] == ["v", "v"]  # type: ignore[union-attr]
    assert _names(merged) == {"start", "v"}


# -- the language stays: random small grammars, every string up to a length ------------
_ATOMS = [literal("a"), literal("b"), literal("ab"), EMPTY]
_RULES = ["r0", "r1", "r2", "r3"]


@st.composite
def _bodies(draw, depth: int = 0):  # type: ignore[no-untyped-def]
    if depth >= 2 or draw(st.booleans()):
        return draw(st.sampled_from([*_ATOMS, *(Ref(n) for n in _RULES)]))
    kind = draw(st.sampled_from(["concat", "alt", "rep"]))
    if kind == "rep":
        return Repeat(draw(_bodies(depth + 1)), draw(st.integers(0, 1)), draw(
            st.sampled_from([1, 2, None])))
    items = tuple(draw(st.lists(_bodies(depth + 1), min_size=2, max_size=3)))
    return Concat(items) if kind == "concat" else Alternate(items)


@st.composite
def _grammars(draw):  # type: ignore[no-untyped-def]
    bodies = [draw(_bodies()) for _ in _RULES]
    for k in range(len(bodies)):  # copies of another rule's body: what merging finds
        if draw(st.integers(0, 3)) == 0:
            bodies[k] = bodies[draw(st.integers(0, len(bodies) - 1))]
    start = Alternate(tuple(Ref(n) for n in _RULES))
    return Grammar({"start": start, **dict(zip(_RULES, bodies, strict=True))}, "start")


def _language(automaton: PushdownAutomaton, max_len: int) -> set[tuple[str, bool]]:
    out = set()
    for n in range(max_len + 1):
        for chars in itertools.product("ab", repeat=n):
            text = "".join(chars)
            state = automaton.walk(automaton.start, text.encode())
            if state != DEAD:
                out.add((text, bool(automaton.accepting[state])))
    return out


@settings(max_examples=150, deadline=None)
@given(_grammars())
def test_merging_keeps_the_language(grammar: Grammar) -> None:
    try:
        checked = check_grammar(grammar)
        original = PushdownAutomaton(checked)
    except CompileError:  # (left recursion, a rule deriving nothing)
        assume(False)
        return
    merged = merge_equal_rules(checked)
    assert len(merged.rules) <= len(checked.rules)
    assert _language(PushdownAutomaton(merged), 6) == _language(original, 6)
