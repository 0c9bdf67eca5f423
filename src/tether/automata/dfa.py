"""Lazily built byte automata: the base every engine's automaton shares, and the DFA
of a trimmed NFA (subset construction on demand), with a bound on states.

:class:`LazyAutomaton` interns keys (what a state stands for) as integers and keeps the
transition table; :class:`LazyDFA` is the subset construction; the pushdown engine of
:mod:`tether.grammar.pda` is the other subclass.

Bytes are grouped into equivalence classes (bytes no NFA edge tells apart), so a row of
the transition table has one entry per class. State ``DEAD`` (0) is the empty set; state
``start`` is 1. Rows are computed on demand, whole, the first time a state is left:
``table[s, c]`` is ``UNKNOWN`` (-1) until then. Because the NFA is trimmed, every state
other than ``DEAD`` can still reach an accepting state — so "not DEAD" means "a prefix of
some string of the language".

The table is a numpy array that may be reallocated as it grows: read ``dfa.table`` after
calling :meth:`LazyDFA.ensure_rows`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable

import numpy as np

from tether.automata.nfa import Nfa
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
            grow = self.table.shape[0]
            self.table = np.vstack(
                [self.table, np.full((grow, self.n_classes), UNKNOWN, dtype=np.int32)])
            self.accepting = np.concatenate([self.accepting, np.zeros(grow, dtype=bool)])
        self._ids[key] = sid
        self._keys.append(key)
        self._on_new_state(sid, key)
        return sid

    def _on_new_state(self, sid: int, key: Hashable) -> None:
        """Record the flags of a state just interned (whether it accepts)."""
        self.accepting[sid] = self._accepts(key)


class LazyDFA(LazyAutomaton):
    """Subset construction on demand over a trimmed NFA (see the module docstring)."""

    def __init__(self, nfa: Nfa, *, max_states: int = MAX_DFA_STATES,
                 source: str | None = None) -> None:
        self._accept = nfa.accept
        self._eps = nfa.eps
        class_of_byte, n_classes = byte_classes(nfa.edges)
        super().__init__(class_of_byte, n_classes, frozenset(), max_states=max_states,
                         source=source)
        # Per NFA state: its edges in class units (lo_class, hi_class, target).
        cls = self.class_of_byte
        self._class_edges = [[(int(cls[lo]), int(cls[hi]), t) for lo, hi, t in edges]
                             for edges in nfa.edges]
        self._closure_memo: dict[int, frozenset[int]] = {}
        self.start = self._intern(self._closure(nfa.start))

    def _accepts(self, key: Hashable) -> bool:
        return self._accept in key  # type: ignore[operator]

    def _closure(self, nfa_state: int) -> frozenset[int]:
        memo = self._closure_memo.get(nfa_state)
        if memo is None:
            memo = self._closure_memo[nfa_state] = epsilon_closure(
                self._eps, nfa_state, lambda s: bool(self._class_edges[s]) or s == self._accept)
        return memo

    def _compute_row(self, state: int) -> None:
        buckets: list[set[int]] = [set() for _ in range(self.n_classes)]
        for s in self._keys[state]:  # type: ignore[attr-defined]
            for lo, hi, t in self._class_edges[s]:
                closure = self._closure(t)
                for c in range(lo, hi + 1):
                    buckets[c].update(closure)
        row = np.empty(self.n_classes, dtype=np.int32)
        interned: dict[frozenset[int], int] = {}
        for c, bucket in enumerate(buckets):
            key = frozenset(bucket)
            sid = interned.get(key)
            if sid is None:
                sid = interned[key] = self._intern(key)
            row[c] = sid
        self.table[state] = row


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
