"""Token masks of a pushdown automaton, composed from per-frame pieces.

A configuration of :class:`~tether.grammar.pda.PushdownAutomaton` is a set of stacks, and
reading a token from a set of stacks reads it from each stack separately, so a
configuration's mask is the union of its stacks' masks. For one stack — a top frame
``S`` over a parent node ``P`` — a token either stays inside ``S`` (calls from ``S`` may
come and go, but ``S`` itself never ends), or ends ``S`` after some prefix and reads the
rest from ``P``. Hence::

    mask(S over P) = inner(S)  ∪  ⋃ over the trie nodes n where S may end:
                                   the tokens below n, read from P

``inner(S)`` and the nodes where ``S`` may end depend on ``S`` only: one full trie walk
per item set (from ``S`` standing on a wall), cached for the life of the compiled
constraint and shared by every stack that has ``S`` on top. The context-dependent rest is
a walk of the few subtrees below those nodes (inside a string: the tokens that close it),
or, when ``S`` may end before reading anything, the cached mask of ``P`` itself. So a
configuration never seen before costs small walks instead of a walk of the vocabulary.
"""

from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np

from tether.engine.regular import PRECOMPUTE_STATES, SATURATION, RegularCompiled
from tether.grammar.pda import BOTTOM, MAX_STACK_NODES, PushdownAutomaton
from tether.vocab import Vocabulary

MAX_CACHED_FRAMES = 8192


class PushdownCompiled(RegularCompiled):
    """A grammar compiled for a vocabulary, run by a pushdown automaton."""

    def __init__(self, constraint: object, vocab: Vocabulary, pda: PushdownAutomaton, *,
                 compile_seconds: float = 0.0) -> None:
        super().__init__(constraint, vocab, pda, compile_seconds=compile_seconds)
        self.pda = pda
        self._not_eos = ~self._eos_words
        # Per item set: (its inner mask, the trie nodes where it may end, may it end at once)
        self._frames: OrderedDict[int, tuple[np.ndarray, np.ndarray, bool]] = OrderedDict()

    def precompute(self, deadline: float, max_states: int = PRECOMPUTE_STATES) -> int:
        """Compute the start state's mask (what the user waits for); later masks are
        composed when first needed, from frame masks cached as they are met."""
        with self._lock:
            if self.pda.start not in self._masks:
                self.state_mask(self.pda.start)
        return 1

    @property
    def saturated(self) -> bool:
        return super().saturated or self.pda.n_stack_nodes > SATURATION * MAX_STACK_NODES

    def _context(self, state: int) -> tuple[str, ...]:
        where = self.pda.grammar.where
        return tuple(f"{name} ({where[name]})" if where.get(name) not in (None, "") else name
                     for name in self.pda.rules_at(state))

    def _compute_mask(self, state: int) -> np.ndarray:
        started = time.perf_counter()
        # Masks of parent states a composition needs are computed first, deepest first,
        # without recursion (stacks can be deep).
        pending = [state]
        while pending:
            top = pending[-1]
            needed = [p for p in self._parents_needed(top) if p not in self._masks]
            if needed:
                pending.extend(needed)
                continue
            pending.pop()
            if top not in self._masks:
                self._store(top, self._compose(top), started)
                started = time.perf_counter()
        return self.state_mask(state)

    def _parents_needed(self, state: int) -> list[int]:
        out = []
        for item, parent in self.pda.kernel(state):
            if parent != BOTTOM and self._frame(item)[2]:
                out.append(self.pda.stack_state(parent))
        return out

    def _compose(self, state: int) -> np.ndarray:
        words = np.zeros_like(self._empty)
        for item, parent in self.pda.kernel(state):
            inner, ends, ends_at_once = self._frame(item)
            words |= inner
            if parent == BOTTOM:
                continue
            below = self.pda.stack_state(parent)
            if ends_at_once:
                words |= self.state_mask(below) & self._not_eos
            if ends.size:
                words |= self._walker.subtrees_mask(ends, below)
        return words

    def _frame(self, item: int) -> tuple[np.ndarray, np.ndarray, bool]:
        hit = self._frames.get(item)
        if hit is None:
            walled = self.pda.walled_state(item)
            inner, ends = self._walker.mask_and_events(walled, lambda: self.pda.pops)
            hit = (inner, ends, bool(self.pda.pops[walled]))
            self._frames[item] = hit
            if len(self._frames) > MAX_CACHED_FRAMES:
                self._frames.popitem(last=False)
        return hit
