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
constraint and shared by every stack that has ``S`` on top. When ``S`` may end before
reading anything, the tokens read from ``P`` are ``P``'s own (cached) mask. Otherwise
the rest is the same decomposition one level down: below the nodes ``N`` where ``S``
ended, ``P``'s top frame ``T`` reads by itself (a walk of those subtrees from ``T`` on a
wall, cached per (``T``, ``N``)), and below the nodes where ``T`` ends in turn, ``P``'s
parent reads — until no node is left (tokens are short) or the bottom is reached.

So every walk runs from a frame standing on a wall, never from a whole parser stack:
the automaton states walks create depend on the grammar, not on the text read so far,
and are shared by every position of every text. A configuration never seen before costs
a few cached lookups and small walks.

A frame of a rule that calls no other rule (a JSON string, a number, an enum) reads the
same in every grammar that has the same rule, so its walk is also shared across compiled
constraints of one vocabulary, keyed by a digest of the rule's automaton
(:meth:`~tether.grammar.pda.PushdownAutomaton.leaf_frame_key`; bounded, LRU): the
schemas a server compiles share their plain strings and numbers.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

from tether.engine.regular import PRECOMPUTE_STATES, SATURATION, RegularCompiled
from tether.grammar.pda import BOTTOM, MAX_STACK_NODES, PushdownAutomaton
from tether.vocab import Vocabulary

MAX_CACHED_FRAMES = 8192
MAX_CACHED_SUBFRAMES = 2048  # (frame, trie nodes) walks kept: a mask each (6 KB at 49k tokens)
MAX_SUBFRAME_KEY = 1024  # trie nodes beyond which a subtree walk is not cached
MAX_SHARED_FRAMES = 4096  # leaf-rule frames shared by every grammar of a process

Frame = tuple[np.ndarray, np.ndarray, bool]  # inner mask, trie nodes where it ends, at once

# Frames of rules that call no other rule (a JSON string, a number, a key) read the same
# in every grammar with the same rule: shared per vocabulary, keyed by content.
_SHARED_FRAMES: OrderedDict[tuple[str, Hashable], Frame] = OrderedDict()
_SHARED_FRAMES_LOCK = threading.Lock()


class PushdownCompiled(RegularCompiled):
    """A grammar compiled for a vocabulary, run by a pushdown automaton."""

    def __init__(self, constraint: object, vocab: Vocabulary, pda: PushdownAutomaton, *,
                 compile_seconds: float = 0.0) -> None:
        super().__init__(constraint, vocab, pda, compile_seconds=compile_seconds)
        self.pda = pda
        self._not_eos = ~self._eos_words
        # Per item set: (its inner mask, the trie nodes where it may end, may it end at once)
        self._frames: OrderedDict[int, Frame] = OrderedDict()
        # Per (item set, trie nodes): what it reads below the nodes, where it ends there
        self._subframes: OrderedDict[tuple[int, bytes], tuple[np.ndarray, np.ndarray]] = (
            OrderedDict())

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
            if ends_at_once:
                words |= self.state_mask(self.pda.stack_state(parent)) & self._not_eos
            if ends.size:
                self._read_below(ends, parent, words)
        return words

    def _read_below(self, nodes: np.ndarray, node: int, words: np.ndarray) -> None:
        """Add to ``words`` the tokens that continue below trie ``nodes`` with the rest
        read from stack ``node``: frame by frame down the stack (module docstring)."""
        while nodes.size and node != BOTTOM:
            item, parent = self.pda.frame_of(node)
            below, ends = self._subframe(item, nodes)
            words |= below
            if self.pda.pops[self.pda.walled_state(item)]:  # ends before reading a byte
                # (a node in both is walked twice below: the same tokens, no harm)
                ends = np.concatenate([ends, nodes])
            nodes, node = ends, parent

    def _frame(self, item: int) -> tuple[np.ndarray, np.ndarray, bool]:
        hit = self._frames.get(item)
        if hit is None:
            shared_key = self.pda.leaf_frame_key(item)
            if shared_key is not None:
                hit = _shared_frame(self.vocab, shared_key)
            if hit is None:
                walled = self.pda.walled_state(item)
                inner, ends = self._walker.mask_and_events(walled, lambda: self.pda.pops)
                inner.flags.writeable = False
                hit = (inner, ends, bool(self.pda.pops[walled]))
                if shared_key is not None:
                    _share_frame(self.vocab, shared_key, hit)
            self._frames[item] = hit
            if len(self._frames) > MAX_CACHED_FRAMES:
                self._frames.popitem(last=False)
        return hit

    def _subframe(self, item: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # Large node sets are rarely met again: not worth keying.
        key = (item, np.sort(nodes).tobytes()) if nodes.size <= MAX_SUBFRAME_KEY else None
        hit = self._subframes.get(key) if key is not None else None
        if hit is None:
            hit = self._walker.subtrees_mask_and_events(
                nodes, self.pda.walled_state(item), lambda: self.pda.pops)
            if key is not None:
                self._subframes[key] = hit
                if len(self._subframes) > MAX_CACHED_SUBFRAMES:
                    self._subframes.popitem(last=False)
        return hit


def _shared_frame(vocab: Vocabulary, key: Hashable) -> Frame | None:
    with _SHARED_FRAMES_LOCK:
        hit = _SHARED_FRAMES.get((vocab.fingerprint, key))
        if hit is not None:
            _SHARED_FRAMES.move_to_end((vocab.fingerprint, key))
        return hit


def _share_frame(vocab: Vocabulary, key: Hashable, frame: Frame) -> None:
    with _SHARED_FRAMES_LOCK:
        _SHARED_FRAMES[(vocab.fingerprint, key)] = frame
        if len(_SHARED_FRAMES) > MAX_SHARED_FRAMES:
            _SHARED_FRAMES.popitem(last=False)
