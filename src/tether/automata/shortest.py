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

A shortest string itself (:class:`Witnesses`) is read back along the same NFA: from a state
at distance ``d``, an epsilon move to a state at ``d``, a byte move to one at ``d - 1``, or
a call whose cost and continuation add up to ``d``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain

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
    eps_ptr, eps_to = _csr(eps[:n])
    edge_ptr, edge_to = _csr(edges[:n], width=3)
    moves = [calls.get(s, ()) for s in range(n)]
    call_ptr, call_to = _csr(moves, width=2)
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


def _csr(lists: Sequence[Sequence], width: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Row pointers and the targets of per-state move lists: ints, or tuples of
    ``width`` ints whose last is the target."""
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.fromiter(map(len, lists), dtype=np.int64, count=len(lists)))
    moves = chain.from_iterable(lists)
    flat = np.fromiter(chain.from_iterable(moves) if width else moves, dtype=np.int64)
    if width:
        flat = flat[width - 1::width].copy()
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


EPSILON, BYTE, CALL = range(3)  # the kinds of move _move returns


def _move(s: int, d: int, distance: Callable[[int], int], moves: Moves,
          call_cost: Callable[[int, int], int]) -> tuple[int, object, int]:
    """The move a shortest string takes from ``s`` (at distance ``d > 0``): ``(EPSILON,
    None, t)``, ``(BYTE, (lo, hi), t)`` or ``(CALL, rule, t)`` — the first that keeps to
    ``distance``, epsilon moves first, then bytes, then calls."""
    eps, edges, calls = moves(s)
    for t in eps:
        if distance(t) == d:
            return EPSILON, None, t
    for lo, hi, t in edges:
        if distance(t) + 1 == d:
            return BYTE, (lo, hi), t
    rule, t = next((k, t) for k, t in calls if call_cost(k, s) + distance(t) == d)
    return CALL, rule, t


class Witnesses:
    """Shortest strings from NFA states to the end of their rule, memoised.

    From a state at distance ``d``, a shortest string follows ``distance`` (a call of rule
    ``k`` from state ``s`` costs ``call_cost(k, s)`` and reads a shortest string of ``k``
    from ``rule_start(k, s)``), spelling each byte class with ``spelling``. Strings
    compose at calls: the string of a rule's start and of every state where a walk
    resumes after a call is kept, and later walks stop at the first kept state they
    meet, so a generation moving along a rule walks a few bytes to the next call per
    question. Iterative (rules nest deeply); holds at most ``max_bytes`` (then starts
    again)."""

    def __init__(self, distance: Callable[[int], int], moves: Moves,
                 call_cost: Callable[[int, int], int], rule_start: Callable[[int, int], int],
                 spelling: Spelling, max_bytes: int = 1 << 24) -> None:
        self._distance, self._moves, self._call_cost = distance, moves, call_cost
        self._rule_start, self._spelling = rule_start, spelling
        self._max_bytes = max_bytes
        self._kept: dict[int, bytes] = {}
        self.held_bytes = 0

    def of(self, state: int) -> bytes | None:
        """A shortest string from NFA ``state`` to its rule's end (``None``: none)."""
        hit = self._kept.get(state)
        if hit is not None:
            return hit
        if self._distance(state) >= INF:
            return None
        if self.held_bytes > self._max_bytes:
            self._kept.clear()
            self.held_bytes = 0
        jobs = [_Walk(state)]
        done = b""
        while True:
            job = jobs[-1]
            if job.resume >= 0:  # its callee's string is done
                job.resumed(done)
            callee = self._walk(job)
            if callee >= 0:
                jobs.append(_Walk(callee))
                continue
            done = self._keep(job)
            jobs.pop()
            if not jobs:
                return done

    def _walk(self, job: _Walk) -> int:
        """Walk ``job`` on to its end, a kept state or a call whose callee is not kept
        (returned: the callee's start state; -1 otherwise)."""
        distance, kept = self._distance, self._kept
        while True:
            s = job.cur
            if s != job.origin and s in kept:
                job.close_run()
                job.pieces.append(kept[s])
                return -1
            d = distance(s)
            if d <= 0:
                return -1
            kind, what, nxt = _move(s, d, distance, self._moves, self._call_cost)
            if kind == BYTE:
                job.run.append(self._spelling.of_range(*what))  # type: ignore[misc]
            elif kind == CALL:
                job.close_run()
                start = self._rule_start(what, s)  # type: ignore[arg-type]
                job.resume = nxt
                if start not in kept:
                    return start
                job.resumed(kept[start])
                continue
            job.cur = nxt

    def _keep(self, job: _Walk) -> bytes:
        """Finish ``job``: its string, kept with those of the states it resumed at."""
        job.close_run()
        pieces = job.pieces
        self._kept[job.origin] = out = b"".join(pieces)
        self.held_bytes += len(out)
        for s, at in job.anchors:
            if s not in self._kept:
                self._kept[s] = rest = b"".join(pieces[at:])
                self.held_bytes += len(rest)
        return out


class _Walk:
    """A shortest string being walked: from ``origin``, now at ``cur``; its pieces so far,
    the bytes since the last call, where to go on once the callee walked returns."""

    def __init__(self, origin: int) -> None:
        self.origin = self.cur = origin
        self.pieces: list[bytes] = []
        self.run = bytearray()
        self.resume = -1
        self.anchors: list[tuple[int, int]] = []  # (state resumed at, its first piece)

    def close_run(self) -> None:
        if self.run:
            self.pieces.append(bytes(self.run))
            self.run.clear()

    def resumed(self, callee: bytes) -> None:
        """The callee's string is ``callee``: go on after the call."""
        self.pieces.append(callee)
        self.cur, self.resume = self.resume, -1
        self.anchors.append((self.cur, len(self.pieces)))
