"""Shortest completions: how many bytes a state of an automaton still needs to accept.

The budget of a generation (docs/generation.md, "Budget") is checked against these
distances. Both engines keep, behind their lazily built states, an NFA whose states
each lie in one *rule* (a regex is one rule): a byte move costs 1, an epsilon move 0,
and a call of rule ``k`` (grammars only) costs the length of ``k``'s shortest string,
then continues at the call's target. :func:`distances_to_end` computes, for every NFA
state, the length of the shortest path to the end of its rule — a fixed point, since a
call's cost is itself such a distance. A state of the automaton is a set of NFA states
(the DFA) or a set of parser stacks (the pushdown automaton, where each stack adds up
its frames' distances); its distance is the least of its members'.

The walk back from a state to the shortest string (:func:`shortest_witness`) uses the
automaton's own rows: from a state at distance ``d`` some byte leads to a state at
distance ``d - 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from tether.automata.dfa import DEAD, LazyAutomaton

INF = 1 << 60
MAX_PASSES = 10_000  # the fixed point converges in a few passes (one per rule nesting)

CallCost = Callable[[int, list[int]], int]  # (rule, current distances) -> its shortest string


def distances_to_end(edges: Sequence[Sequence[tuple[int, int, int]]],
                     eps: Sequence[Sequence[int]], ends: Sequence[int], *,
                     calls: Mapping[int, Sequence[tuple[int, int]]] | None = None,
                     call_cost: CallCost | None = None, n: int | None = None) -> list[int]:
    """Per NFA state ``0..n-1``: the bytes on the shortest path to an end state (``INF`` if
    none). ``calls[s]`` lists ``(rule, target)`` call moves, priced by ``call_cost``.

    States are relaxed in decreasing order, pass after pass, until nothing changes:
    Thompson fragments and rule blocks mostly point forward, so a pass or two per level
    of nesting suffices."""
    n = len(edges) if n is None else n
    dist = [INF] * n
    for s in ends:
        if s < n:
            dist[s] = 0
    calls = calls or {}
    for _ in range(MAX_PASSES):
        changed = False
        for s in range(n - 1, -1, -1):
            best = dist[s]
            for t in eps[s]:
                if dist[t] < best:
                    best = dist[t]
            for _lo, _hi, t in edges[s]:
                if dist[t] + 1 < best:
                    best = dist[t] + 1
            for rule, t in calls.get(s, ()):
                cost = call_cost(rule, dist) + dist[t]  # type: ignore[misc]
                if cost < best:
                    best = cost
            if best < dist[s]:
                dist[s] = best
                changed = True
        if not changed:
            break
    return dist


def shortest_witness(automaton: LazyAutomaton, state: int,
                     distance: Callable[[int], int], limit: int) -> bytes | None:
    """A shortest string from ``state`` to acceptance, following ``distance`` down the
    automaton's rows (``None`` if no accepting state is found within ``limit`` bytes)."""
    # Each class spelled by one of its bytes, printable ASCII first (tokens exist for it).
    order = np.array([*range(32, 127), *range(32), *range(127, 256)])
    rank = np.empty(automaton.n_classes, dtype=np.int64)
    spelled = np.empty(automaton.n_classes, dtype=np.int64)
    rank[automaton.class_of_byte[order[::-1]]] = np.arange(255, -1, -1)
    spelled[automaton.class_of_byte[order[::-1]]] = order[::-1]
    out = bytearray()
    while not automaton.accepting[state]:
        if len(out) >= limit:
            return None
        automaton.ensure_rows([state])
        row = automaton.table[state]
        targets = np.unique(row[row != DEAD]).tolist()
        if not targets:
            return None
        best = min(targets, key=distance)
        classes = np.flatnonzero(row == best)
        out.append(int(spelled[classes[np.argmin(rank[classes])]]))
        state = best
    return bytes(out)
