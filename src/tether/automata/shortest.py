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
from numba import njit

INF = 1 << 60
MAX_PASSES = 10_000  # the fixed point converges in a few passes (one per rule nesting)

Priced = Callable[[int, np.ndarray], int]  # (rule, current distances) -> its shortest string


def distances_to_end(edges: Sequence[Sequence[tuple[int, int, int]]],
                     eps: Sequence[Sequence[int]], ends: Sequence[int], *,
                     calls: Mapping[int, Sequence[tuple[int, int]]] | None = None,
                     rule_start: Callable[[int], int] | None = None,
                     priced: Priced | None = None, n: int | None = None) -> np.ndarray:
    """Per NFA state ``0..n-1``: the bytes on the shortest path to an end state (``INF`` if
    none). ``calls[s]`` lists ``(rule, target)`` call moves; a call costs the distance of
    ``rule_start(rule)``, or, where that is -1 (a rule built later), ``priced(rule,
    distances)``, which may depend on other distances.

    States are relaxed in decreasing order, pass after pass, until nothing changes
    (compiled with numba): Thompson fragments and rule blocks mostly point forward, so a
    pass or two per level of nesting suffices. Priced calls are priced again after each
    fixed point until their prices settle."""
    n = len(edges) if n is None else n
    calls = calls or {}
    eps_ptr, eps_to = _csr([eps[s] for s in range(n)])
    edge_ptr, edge_to = _csr([[t for _, _, t in edges[s]] for s in range(n)])
    moves = [calls.get(s, ()) for s in range(n)]
    call_ptr, call_to = _csr([[t for _, t in m] for m in moves])
    rules = [rule for m in moves for rule, _ in m]
    starts = np.array([rule_start(r) if rule_start else -1 for r in rules], dtype=np.int64)
    cost = np.zeros(len(rules), dtype=np.int64)
    dist = np.full(n, INF, dtype=np.int64)
    dist[[s for s in ends if s < n]] = 0
    unpriced = np.flatnonzero(starts < 0).tolist()

    def price() -> None:
        for j in unpriced:
            cost[j] = min(INF, priced(rules[j], dist)) if priced else INF

    price()
    for _ in range(MAX_PASSES):
        before = cost.copy()
        _relax(dist, eps_ptr, eps_to, edge_ptr, edge_to, call_ptr, call_to, starts, cost)
        price()
        if np.array_equal(cost, before):
            break
    return dist


def _csr(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists])
    flat = np.fromiter((t for x in lists for t in x), dtype=np.int64, count=int(ptr[-1]))
    return ptr, flat


@njit(cache=True, nogil=True)
def _relax(dist, eps_ptr, eps_to, edge_ptr, edge_to, call_ptr, call_to, starts, cost
           ):  # pragma: no cover - compiled
    for _ in range(MAX_PASSES):
        changed = False
        for s in range(dist.size - 1, -1, -1):
            best = dist[s]
            for j in range(eps_ptr[s], eps_ptr[s + 1]):
                best = min(best, dist[eps_to[j]])
            for j in range(edge_ptr[s], edge_ptr[s + 1]):
                best = min(best, dist[edge_to[j]] + 1)
            for j in range(call_ptr[s], call_ptr[s + 1]):
                price = dist[starts[j]] if starts[j] >= 0 else cost[j]
                best = min(best, price + dist[call_to[j]])
            if best < dist[s]:
                dist[s] = best
                changed = True
        if not changed:
            return


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
