"""A pre-built automaton copied into an NFA: its template (states that reach an end,
renumbered, moves by state then first byte) and the pushdown engine's lazy copy, whose
states get their moves only when asked for — the same moves as an eager copy, state by
state, in any order."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.automata.nfa import LazyCopies, MoveLists, NfaBuilder
from tether.automata.regex_ast import Automaton
from tether.schema.strings import json_string

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def _automaton(n: int, edges: list[tuple[int, int, int, int]], start: int,
               accepting: tuple[int, ...]) -> Automaton:
    table = np.array(edges, dtype=np.int32).reshape(-1, 4)
    table.flags.writeable = False
    return Automaton(n, table, start, accepting)


@st.composite
def automata(draw: st.DrawFn) -> Automaton:
    n = draw(st.integers(1, 6))
    state = st.integers(0, n - 1)
    edges = draw(st.lists(st.tuples(state, st.integers(0, 4), st.integers(0, 2), state),
                          max_size=12))
    edges = [(s, 97 + lo, 97 + lo + width, t) for s, lo, width, t in edges]
    accepting = tuple(sorted(set(draw(st.lists(state, max_size=3)))))
    return _automaton(n, edges, draw(state), accepting)


def _moves(edges: MoveLists, s: int) -> tuple:
    moves = edges[s]
    return tuple(moves) if moves is not None else edges.copies.moves(s)


def _copy(node: Automaton, *, lazy: bool, lead: int) -> MoveLists:
    builder = NfaBuilder(10_000, None)
    builder.edges = MoveLists(LazyCopies() if lazy else None)
    for _ in range(lead):  # (states before the copy: it is numbered from the next free one)
        builder.new()
    builder.automaton(node)
    return builder.edges


def _reachable_words(node: Automaton, limit: int = 3) -> set[bytes]:
    """The words of up to ``limit`` bytes of ``node``, by brute force."""
    out, frontier = set(), [(node.start, b"")]
    for _ in range(limit + 1):
        nxt = []
        for s, word in frontier:
            if s in node.accepting:
                out.add(word)
            for src, lo, hi, dst in node.edges.tolist():
                if src == s:
                    nxt += [(dst, word + bytes([b])) for b in range(lo, hi + 1)]
        frontier = nxt
    return out


def _words_of_copy(edges: MoveLists, eps: list[list[int]], start: int, end: int,
                   limit: int = 3) -> set[bytes]:
    def closure(states: set[int]) -> set[int]:
        stack, seen = list(states), set(states)
        while stack:
            for t in eps[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return seen

    out, frontier = set(), [(frozenset(closure({start})), b"")]
    for _ in range(limit + 1):
        nxt = []
        for states, word in frontier:
            if end in states:
                out.add(word)
            for b in range(256):
                to = {t for s in states for lo, hi, t in _moves(edges, s) if lo <= b <= hi}
                if to:
                    nxt.append((frozenset(closure(to)), word + bytes([b])))
        frontier = nxt
    return out


@SETTINGS
@given(automata(), st.integers(0, 3), st.randoms(use_true_random=False))
def test_lazy_copy_reads_as_the_automaton(node: Automaton, lead: int, rng: random.Random
                                         ) -> None:
    eager = _copy(node, lazy=False, lead=lead)
    lazy = _copy(node, lazy=True, lead=lead)
    assert len(lazy) == len(eager)
    assert lazy.copies.n_moves(lazy) == sum(map(len, eager))
    states = list(range(len(eager)))
    rng.shuffle(states)
    for s in states:  # any order: each state's moves made alone
        assert _moves(lazy, s) == tuple(eager[s])
    builder = NfaBuilder(10_000, None)
    builder.edges = MoveLists(LazyCopies())
    start, end = builder.automaton(node)
    assert _words_of_copy(builder.edges, builder.eps, start, end) == _reachable_words(node)


def test_spelling_out_makes_every_state_as_an_eager_copy() -> None:
    node = json_string(excluded_values=("location", "unit"))  # a key automaton
    eager = _copy(node, lazy=False, lead=5)
    lazy = _copy(node, lazy=True, lead=5)
    assert None in lazy
    lazy[30] = lazy.copies.moves(30)  # (one made already)
    lazy.copies.spell_out(lazy)
    assert None not in lazy
    assert [tuple(m) for m in lazy] == [tuple(m) for m in eager]
