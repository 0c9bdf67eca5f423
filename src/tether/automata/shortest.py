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

A shortest string itself (:func:`witness`) is read back along the same NFA: from a state
at distance ``d``, an epsilon move to a state at ``d``, a byte move to one at ``d - 1``, or
a call whose cost and continuation add up to ``d``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

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


class Spelling:
    """A byte for each byte class: one of ``usable`` if the class has one (the bytes a
    vocabulary has a token for), printable ASCII first, then blanks, then the bytes of
    non-ASCII UTF-8, the rest last."""

    ORDER = (*range(32, 127), 9, 10, 13, *range(0x80, 0xF5), *range(32), 127,
             *range(0xF5, 0x100))

    def __init__(self, class_of_byte: np.ndarray, n_classes: int,
                 usable: frozenset[int] = frozenset(range(256))) -> None:
        self.byte = np.full(n_classes, -1, dtype=np.int64)
        self.rank = np.full(n_classes, 1 << 30, dtype=np.int64)
        order = [b for b in self.ORDER if b in usable] + [b for b in self.ORDER
                                                         if b not in usable]
        for r, b in enumerate(dict.fromkeys(order)):
            c = class_of_byte[b]
            if self.byte[c] < 0:
                self.byte[c], self.rank[c] = b, r
        self._ranges: dict[tuple[int, int], int] = {}

    def of_range(self, lo: int, hi: int) -> int:
        """The best byte of the classes ``lo..hi``."""
        hit = self._ranges.get((lo, hi))
        if hit is None:
            hit = self._ranges[lo, hi] = int(
                self.byte[lo + int(np.argmin(self.rank[lo:hi + 1]))])
        return hit


Moves = Callable[[int], tuple[Sequence[int], Sequence[tuple[int, int, int]],
                              Sequence[tuple[int, int]]]]  # eps, byte edges, calls


def witness(state: int, distance: Callable[[int], int], moves: Moves,
            call_cost: Callable[[int, int], int], rule_start: Callable[[int, int], int],
            spelling: Spelling) -> bytes:
    """A shortest string from NFA ``state`` to the end of its rule, following
    ``distance`` (a call of rule ``k`` from state ``s`` costs ``call_cost(k, s)`` and
    reads a shortest string of ``k`` from ``rule_start(k, s)``). Iterative: rules nest
    deeply."""
    out = bytearray()
    todo = [state]
    while todo:
        s = todo.pop()
        d = distance(s)
        while d > 0:
            eps, edges, calls = moves(s)
            nxt = next((t for t in eps if distance(t) == d), None)
            if nxt is None:
                edge = next(((lo, hi, t) for lo, hi, t in edges if distance(t) + 1 == d), None)
                if edge is not None:
                    out.append(spelling.of_range(edge[0], edge[1]))
                    nxt = edge[2]
                else:
                    rule, nxt = next((k, t) for k, t in calls
                                     if call_cost(k, s) + distance(t) == d)
                    todo.append(nxt)  # after the callee's string
                    nxt = rule_start(rule, s)
            s, d = nxt, distance(nxt)
    return bytes(out)
