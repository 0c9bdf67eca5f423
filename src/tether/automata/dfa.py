"""Lazily built byte automata: the base every engine's automaton shares, and the DFA
of a trimmed NFA (subset construction on demand), with a bound on states.

:class:`LazyAutomaton` interns keys (what a state stands for) as integers and keeps the
transition table; :class:`LazyDFA` is the subset construction; the pushdown engine of
:mod:`tether.engine.pda` is the other subclass.

Bytes are grouped into equivalence classes (bytes no NFA edge tells apart), so a row of
the transition table has one entry per class. State ``DEAD`` (0) is the empty set; state
``start`` is 1. Rows are computed on demand, whole, the first time a state is left:
``table[s, c]`` is ``UNKNOWN`` (-1) until then. Because the NFA is trimmed, every state
other than ``DEAD`` can still reach an accepting state — so "not DEAD" means "a prefix of
some string of the language".

The table is a numpy array that may be reallocated as it grows: read ``dfa.table`` after
calling :meth:`LazyDFA.ensure_rows`. Its rows past the last state (``n_states``) are
unset.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable

import numpy as np

from tether.automata.nfa import Nfa
from tether.automata.shortest import INF, Spelling, Witnesses, distances_to_end
from tether.errors import LimitExceeded
from tether.gc_pause import paused_gc

DEAD = 0
UNKNOWN = -1
MAX_DFA_STATES = 100_000


class LazyAutomaton(ABC):
    """A deterministic automaton over byte classes whose states are built on demand.

    Each state stands for a hashable *key* (a set of NFA states, a parser
    configuration…); keys are interned to consecutive integers, ``DEAD`` being the empty
    key. Subclasses say what a key accepts and compute a state's whole row at once. The
    invariant every engine relies on: a state other than ``DEAD`` can still reach an
    accepting state.
    """

    def __init__(self, class_of_byte: np.ndarray, n_classes: int, dead_key: Hashable, *,
                 max_states: int, source: str | None) -> None:
        self.class_of_byte = class_of_byte
        self.n_classes = n_classes
        self.max_states = max_states
        self.source = source
        self._ids: dict[Hashable, int] = {dead_key: DEAD}
        self._keys: list[Hashable] = [dead_key]
        self.table = np.full((64, n_classes), UNKNOWN, dtype=np.int32)
        self.table[DEAD] = DEAD
        self.accepting = np.zeros(64, dtype=bool)

    @abstractmethod
    def _accepts(self, key: Hashable) -> bool:
        """Whether the state of ``key`` accepts."""

    @abstractmethod
    def _compute_row(self, state: int) -> None:
        """Fill ``self.table[state]`` (use :meth:`_intern` for the targets)."""

    @property
    def n_states(self) -> int:
        """States materialised so far (DEAD included)."""
        return len(self._keys)

    def ensure_rows(self, states: Iterable[int]) -> None:
        """Compute the rows of ``states`` that are still unknown."""
        with paused_gc():
            for s in states:
                if self.table[s, 0] == UNKNOWN:
                    self._compute_row(int(s))

    def step(self, state: int, byte: int) -> int:
        """The state after reading ``byte`` from ``state``."""
        nxt = self.table[state, self.class_of_byte[byte]]
        if nxt == UNKNOWN:
            self._compute_row(state)
            nxt = self.table[state, self.class_of_byte[byte]]
        return int(nxt)

    def walk(self, state: int, data: bytes) -> int:
        """The state after reading ``data`` (``DEAD`` as soon as it dies)."""
        for b in data:
            state = self.step(state, b)
            if state == DEAD:
                break
        return state

    def accepts_after(self, state: int, data: bytes) -> bool:
        """Whether reading ``data`` from ``state`` ends in an accepting state (a
        completion checked before it is trusted, where :attr:`completion_exact` is
        false)."""
        end = self.walk_lightly(state, data)
        return end != DEAD and bool(self.accepting[end])

    def witness_holds(self, data: bytes) -> bool:
        """Whether a shortest completion by the distances, ``data``, surely accepts
        without being read (always where the distances are exact)."""
        return self.completion_exact

    def search_completion(self, state: int, spelling: Spelling, limit: int) -> bytes | None:
        """A shortest string that takes ``state`` to acceptance, searched for when the
        distances' witness does not accept (``None``: none found; automata whose
        distances are exact never need it)."""
        return None

    def walk_lightly(self, state: int, data: bytes) -> int:
        """:meth:`walk`, where an automaton can do it without computing rows (a path's
        next state looked up for bookkeeping, not a step the text takes)."""
        return self.walk(state, data)

    def materialize(self, limit: int) -> bool:
        """Build every state reachable from ``start`` if there are at most ``limit``;
        True if complete."""
        frontier = [self.start]
        seen = {self.start}
        while frontier:
            s = frontier.pop()
            self.ensure_rows([s])
            for t in np.unique(self.table[s]):
                t = int(t)
                if t != DEAD and t not in seen:
                    if len(seen) >= limit:
                        return False
                    seen.add(t)
                    frontier.append(t)
        return True

    start: int

    def _intern(self, key: Hashable) -> int:
        sid = self._ids.get(key)
        if sid is not None:
            return sid
        sid = len(self._keys)
        if sid >= self.max_states:
            raise LimitExceeded(
                f"the constraint's automaton needs more than {self.max_states} states",
                location=1 if self.source is not None else None, source=self.source)
        if sid >= self.table.shape[0]:
            # Rows past the last state are left unwritten (np.empty: pages untouched until
            # used; a large table doubling took 100 ms filled) and set as states come.
            grown = np.empty((2 * sid, self.n_classes), dtype=np.int32)
            grown[:sid] = self.table
            self.table = grown
            self.accepting = np.concatenate([self.accepting, np.zeros(sid, dtype=bool)])
        self.table[sid] = UNKNOWN
        self._ids[key] = sid
        self._keys.append(key)
        self._on_new_state(sid, key)
        return sid

    def _on_new_state(self, sid: int, key: Hashable) -> None:
        """Record the flags of a state just interned (whether it accepts)."""
        self.accepting[sid] = self._accepts(key)

    def spelled_bytes(self, spelling: Spelling) -> frozenset[int]:
        """Every byte a shortest completion spelled by ``spelling`` may hold (one per
        byte move's range)."""
        ranges = {(lo, hi) for edges in self._byte_moves() for lo, hi, _ in edges}
        return frozenset(spelling.of_range(lo, hi) for lo, hi in ranges)

    @abstractmethod
    def _byte_moves(self) -> Iterable[Iterable[tuple[int, int, int]]]:
        """The byte moves (class ranges) of every NFA state behind the automaton."""

    # Whether completion_bytes is exact (else a lower bound, and a witness may not
    # accept: see PushdownAutomaton.completion_bytes).
    completion_exact = True

    @abstractmethod
    def completion_bytes(self, state: int) -> int:
        """The length of the shortest string that takes ``state`` to acceptance
        (:mod:`tether.automata.shortest`; a huge number for ``DEAD``)."""


class LazyDFA(LazyAutomaton):
    """Subset construction on demand over a trimmed NFA (see the module docstring).

    A state's key is its set of NFA states as a sorted tuple: tuples of numbers leave the
    cyclic garbage collector's lists once it has seen them (frozensets never do), and
    long-lived automata hold many keys."""

    def __init__(self, nfa: Nfa, *, max_states: int = MAX_DFA_STATES,
                 source: str | None = None) -> None:
        self._accept = nfa.accept
        self._eps = nfa.eps
        class_of_byte, n_classes = byte_classes(nfa.edges)
        super().__init__(class_of_byte, n_classes, (), max_states=max_states, source=source)
        # Per NFA state: its edges in class units (lo_class, hi_class, target).
        cls = self.class_of_byte
        self._class_edges = [[(int(cls[lo]), int(cls[hi]), t) for lo, hi, t in edges]
                             for edges in nfa.edges]
        self._closure_memo: dict[int, tuple[int, ...]] = {}
        self._nfa_distances: np.ndarray | None = None  # per NFA state, computed on first use
        self._completion: dict[int, int] = {}
        self.start = self._intern(self._closure(nfa.start))

    def _accepts(self, key: Hashable) -> bool:
        return self._accept in key  # type: ignore[operator]

    def _closure(self, nfa_state: int) -> tuple[int, ...]:
        memo = self._closure_memo.get(nfa_state)
        if memo is None:
            memo = self._closure_memo[nfa_state] = tuple(sorted(epsilon_closure(
                self._eps, nfa_state, lambda s: bool(self._class_edges[s]) or s == self._accept)))
        return memo

    def _byte_moves(self) -> Iterable[Iterable[tuple[int, int, int]]]:
        return self._class_edges

    def completion_witness(self, state: int, spelling: Spelling) -> bytes | None:
        """A shortest string that takes ``state`` to acceptance (``None``: none)."""
        self.completion_bytes(state)  # the distances
        dist = self._nfa_distances
        best = min(self._keys[state], key=dist.__getitem__)  # type: ignore[attr-defined]
        no_calls: tuple = ()
        return Witnesses(dist.__getitem__,  # type: ignore[union-attr]
                         lambda s: (self._eps[s], self._class_edges[s], no_calls),
                         lambda rule, s: 0, lambda rule, s: 0, spelling).of(best)

    def completion_bytes(self, state: int) -> int:
        hit = self._completion.get(state)
        if hit is None:
            if self._nfa_distances is None:
                self._nfa_distances = distances_to_end(self._class_edges, self._eps,
                                                       [self._accept])
            dist = self._nfa_distances
            hit = self._completion[state] = int(min(
                (dist[s] for s in self._keys[state]), default=INF))  # type: ignore[attr-defined]
        return hit

    def _compute_row(self, state: int) -> None:
        row = [DEAD] * self.n_classes
        edges = [e for s in self._keys[state] for e in self._class_edges[s]]  # type: ignore[attr-defined]
        interned: dict[tuple[int, ...], int] = {}
        for lo, hi, targets in segments(edges):
            if len(targets) == 1:
                key = self._closure(targets[0])
            else:
                reached: set[int] = set()
                for t in targets:
                    reached.update(self._closure(t))
                key = tuple(sorted(reached))
            sid = interned.get(key)
            if sid is None:
                sid = interned[key] = self._intern(key)
            row[lo:hi + 1] = [sid] * (hi + 1 - lo)
        self.table[state] = row


def segments(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, list[int]]]:
    """Sweep the byte (or class) axis: the elementary segments ``lo..hi`` that some of
    ``ranges`` (``(lo, hi, payload)``) cover, each with the payloads of the ranges
    covering it (a payload may be listed twice)."""
    if len(ranges) == 1:
        lo, hi, x = ranges[0]
        return [(lo, hi, [x])]
    ordered = sorted(ranges)
    if all(a[1] < b[0] for a, b in zip(ordered, ordered[1:], strict=False)):  # disjoint: usual
        return [(lo, hi, [x]) for lo, hi, x in ordered]
    cuts = sorted({lo for lo, _, _ in ranges} | {hi + 1 for _, hi, _ in ranges})
    index = {c: k for k, c in enumerate(cuts)}
    covering: list[list[int]] = [[] for _ in range(len(cuts) - 1)]
    for lo, hi, x in ranges:
        for k in range(index[lo], index[hi + 1]):
            covering[k].append(x)
    return [(cuts[k], cuts[k + 1] - 1, xs) for k, xs in enumerate(covering) if xs]


def epsilon_closure(eps: list[list[int]], state: int,
                    important: Callable[[int], bool]) -> frozenset[int]:
    """The states reachable from ``state`` by epsilon moves (itself included) for which
    ``important`` holds: those a set of NFA states needs to keep (they read a byte,
    accept, or call a rule)."""
    seen = {state}
    stack = [state]
    kept = set()
    while stack:
        s = stack.pop()
        if important(s):
            kept.add(s)
        for t in eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(kept)


def byte_classes(edges_by_state: Iterable[Iterable[tuple[int, int, int]]]
                 ) -> tuple[np.ndarray, int]:
    """Map each byte to its class: bytes between consecutive edge boundaries share one."""
    boundary = np.zeros(257, dtype=bool)
    boundary[0] = True
    for edges in edges_by_state:
        for lo, hi, _ in edges:
            boundary[lo] = True
            boundary[hi + 1] = True
    class_of_byte = (np.cumsum(boundary[:256]) - 1).astype(np.int32)
    return class_of_byte, int(class_of_byte[-1]) + 1
