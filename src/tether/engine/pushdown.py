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
schemas a server compiles share their plain strings and numbers. And the frame of an
automaton state that reads like another state of its rule but for a few strings
(:class:`~tether.automata.regex_ast.Exceptions`: an object's extra keys while they spell
the start of a declared name) is derived from that state's frame: the two are read in
step over the trie only where they differ (:meth:`PushdownCompiled._frame_except`). A
frame that must first read a literal (a key, an enum value, a keyword: each item set on
the way has one move, calls nothing and may not end) is not walked either: it is the
tokens along that path of the trie, plus what the item set after the literal reads
below the path's end (:meth:`PushdownCompiled._frame_of_chain`; walked, the literal cost
a row and a walk round per byte). And a frame that only calls rules (a value's
alternatives, the state of an object whose members come in any order) is composed from
its callees' frames and, below the nodes where a callee ends, what the continuation
reads (:meth:`PushdownCompiled._compose_calls`): those pieces are cached per item set
and per (item set, nodes), so the states of one object share their members' frames.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from functools import reduce

import numpy as np
from numba import njit

from tether.engine import bitmask
from tether.engine.regular import PRECOMPUTE_STATES, SATURATION, RegularCompiled
from tether.grammar.pda import BOTTOM, MAX_STACK_NODES, PushdownAutomaton
from tether.vocab import Vocabulary

MAX_CACHED_FRAMES = 8192
MAX_CACHED_SUBFRAMES = 2048  # (frame, trie nodes) walks kept: a mask each (6 KB at 49k tokens)
MAX_SUBFRAME_KEY = 1024  # trie nodes beyond which a subtree walk is keyed by a fingerprint
MAX_LARGE_SUBFRAME_NODES = 4_000_000  # trie nodes (in and out) of large walks kept: 32 MB
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
        self._large_subframes: OrderedDict[tuple[int, ...], tuple[
            np.ndarray, tuple[np.ndarray, np.ndarray]]] = OrderedDict()
        self._large_nodes = 0  # trie nodes held by _large_subframes
        self._composing: set[int] = set()  # item sets whose frames are being composed

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
                out.append(self.pda.stack_state(self.pda.popped_to(item, parent)))
        return out

    def _compose(self, state: int) -> np.ndarray:
        words = np.zeros_like(self._empty)
        for item, parent in self.pda.kernel(state):
            inner, ends, ends_at_once = self._frame(item)
            words |= inner
            if parent == BOTTOM:
                continue
            if ends_at_once:
                parent_state = self.pda.stack_state(self.pda.popped_to(item, parent))
                words |= self.state_mask(parent_state) & self._not_eos
            if ends.size:
                self._read_below({self.pda.rule_guard(item): ends}, parent, words)
        return words

    def _read_below(self, nodes: dict[int, np.ndarray], node: int, words: np.ndarray
                    ) -> None:
        """Add to ``words`` the tokens that continue below trie nodes with the rest read
        from stack ``node``: frame by frame down the stack (module docstring). ``nodes``
        maps a guard (see :meth:`~tether.grammar.pda.PushdownAutomaton.rule_guard`) to the
        nodes below which the next frame reads with that guard."""
        pda = self.pda
        while nodes and node != BOTTOM:
            item, parent = pda.frame_of(node)
            below_nodes: dict[int, list[np.ndarray]] = {}
            for guard, here in nodes.items():
                guarded = pda.guarded(item, guard)
                below, ends = self._subframe(guarded, here)
                words |= below
                if ends.size:
                    below_nodes.setdefault(pda.rule_guard(guarded), []).append(ends)
                if pda.ends_at_once(guarded):  # ends before reading a byte
                    below_nodes.setdefault(pda.pop_guard(guarded), []).append(here)
            # (a node met twice would be walked twice below, and again at every level)
            nodes = {g: reduce(_union, parts) for g, parts in below_nodes.items()}
            node = parent

    def _frame(self, item: int) -> tuple[np.ndarray, np.ndarray, bool]:
        hit = self._frames.get(item)
        if hit is None:
            like = self.pda.frame_exception(item)
            if like is not None:
                hit = self._frame_except(item, like)
            if hit is None:
                shared_key = self.pda.leaf_frame_key(item)
                if shared_key is not None:
                    hit = _shared_frame(self.vocab, shared_key)
                if hit is None:
                    if item in self._composing:  # a cycle of calls that read nothing
                        raise _Cycle
                    chain = self.pda.forced_chain(item)
                    calls = None if chain else self.pda.calls_alone(item)
                    hit = (self._frame_of_chain(*chain) if chain else
                           self._frame_of_calls(item, calls) if calls else None)
                    if hit is None:
                        hit = self._walk_frame(item)
                    if shared_key is not None:
                        _share_frame(self.vocab, shared_key, hit)
            self._frames[item] = hit
            if len(self._frames) > MAX_CACHED_FRAMES:
                self._frames.popitem(last=False)
        return hit

    def _walk_frame(self, item: int) -> Frame:
        """The frame of ``item`` by a walk of the whole trie from it, on a wall."""
        walled = self.pda.walled_state(item)
        inner, ends = self._walker.mask_and_events(walled, lambda: self.pda.pops)
        ends = np.sort(ends)  # (what _subframe expects of the nodes below)
        inner.flags.writeable = False
        return inner, ends, self.pda.ends_at_once(item)

    def _frame_of_chain(self, classes: tuple[int, ...], after: int) -> Frame:
        """The frame of an item set that must read ``classes`` (a literal) and then
        reads as ``after`` (see :meth:`_read_chain`)."""
        inner, ends = self._read_chain(classes, after, np.zeros(1, dtype=np.int64))
        return inner, ends, False

    def _read_chain(self, classes: tuple[int, ...], after: int, nodes: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """What a frame that must read ``classes`` and then reads as ``after`` reads
        below trie ``nodes`` (sorted): the tokens along the path of ``classes`` below
        each, and what ``after`` reads below the paths' ends; where it ends there (not on
        the way: a literal's item sets may not end)."""
        trie = self._walker.trie
        words = np.zeros_like(self._empty)
        path_ends = _follow(trie.node_class, trie.size, trie.tok_start, trie.tok_ids, nodes,
                            np.array(classes, dtype=np.int32), words)
        ends = np.zeros(0, dtype=np.int64)
        if path_ends.size:
            path_ends = np.sort(path_ends)  # (nodes may nest: their paths' ends interleave)
            below, ends = self._subframe(after, path_ends)
            words |= below
            if self.pda.ends_at_once(after):  # it may end at the paths' ends
                ends = _union(path_ends, ends)
        words.flags.writeable = False
        return words, ends

    def _frame_of_calls(self, item: int, calls: tuple[tuple[int, int, bool, bool], ...]
                        ) -> Frame | None:
        """The frame of an item set that only calls (see
        :meth:`~tether.grammar.pda.PushdownAutomaton.calls_alone`), composed: each
        callee's frame, below the nodes where it ends what the continuation reads, and
        the continuation's frame if the callee may be empty. None if that comes back to
        a frame being composed (a cycle of calls that read nothing): then it is walked."""
        self._composing.add(item)
        try:
            inner, ends = self._compose_calls(calls, None)
        except _Cycle:
            return None
        finally:
            self._composing.discard(item)
        inner.flags.writeable = False
        return inner, ends, self.pda.ends_at_once(item)

    def _compose_calls(self, calls: tuple[tuple[int, int, bool, bool], ...],
                       nodes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """What a frame that only makes ``calls`` reads from the root (``nodes`` None)
        or below trie ``nodes``, and where it ends there (not at ``nodes`` themselves:
        an end before reading is its caller's to see, from the frame's flags). Below
        nodes, no callee may be empty unless nothing follows it."""
        pda = self.pda
        words = np.zeros_like(self._empty)
        parts: list[np.ndarray] = []
        for callee, cont, final, empty in calls:
            if empty and not final:  # the continuation reads from here too
                inner, ends, _ = self._frame(cont)
                words |= inner
                parts.append(ends)
            if nodes is None:
                inner, ends, _ = self._frame(callee)
            else:
                inner, ends = self._subframe(callee, nodes)
            words |= inner
            if not ends.size:
                continue
            if final:  # a tail call: where the callee ends, the frame ends
                parts.append(ends)
                continue
            below, below_ends = self._subframe(cont, ends)
            words |= below
            parts.append(below_ends)
            if pda.ends_at_once(cont):  # the continuation may end at once
                parts.append(ends)
        ends = reduce(_union, parts) if parts else np.zeros(0, dtype=np.int64)
        return words, ends

    def _frame_except(self, item: int, like: int) -> Frame | None:
        """The frame of ``item`` from that of ``like``, which reads what ``item`` reads
        but for a few strings: both read in step over the trie where they differ; the
        subtrees ``item`` cannot read are taken out of ``like``'s frame (their tokens
        and ends), and so are the ends where only ``like`` may end. None if ``item``
        reads a string ``like`` does not, or ends where it does not."""
        pda, trie = self.pda, self._walker.trie
        if pda.item_accepts(item) != pda.item_accepts(like):
            return None
        size, byte = trie.size, trie.node_class
        lost: list[int] = []  # subtrees item cannot read
        not_ends: list[int] = []  # nodes where like ends and item does not
        todo = [(0, item, like)]
        while todo:
            node, a, b = todo.pop()
            row_a, row_b = pda.item_row(a), pda.item_row(b)
            child, end = node + 1, node + int(size[node])
            while child < end:
                c = int(byte[child])
                x, y = row_a[c], row_b[c]
                if x < 0 or y < 0:
                    if y < 0 <= x:
                        return None
                    if x < 0 <= y:
                        lost.append(child)
                elif x != y:
                    if pda.item_accepts(x) != pda.item_accepts(y):
                        if pda.item_accepts(x):
                            return None
                        not_ends.append(child)
                    if size[child] > 1:
                        todo.append((child, x, y))
                child += int(size[child])
        inner, ends, at_once = self._frame(like)
        if lost:
            first = np.array(sorted(lost), dtype=np.int64)
            stop = first + size[first]
            tokens = np.concatenate([trie.tok_ids[trie.tok_start[a]:trie.tok_start[b]]
                                     for a, b in zip(first.tolist(), stop.tolist(), strict=True)])
            inner = inner & ~bitmask.from_ids(tokens, self.vocab.size)
            inner.flags.writeable = False
            at = np.searchsorted(first, ends, side="right") - 1
            ends = ends[(at < 0) | (ends >= stop[np.maximum(at, 0)])]
        if not_ends:
            ends = np.setdiff1d(ends, np.array(not_ends, dtype=np.int64), assume_unique=True)
        return inner, ends, at_once

    def _subframe(self, item: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What frame ``item`` reads below trie ``nodes`` (sorted, unique): the tokens that
        continue below them and the nodes (sorted) where it ends there. Cached per (item
        set, nodes): small sets keyed by their bytes; large ones (an expression may end
        after nearly any prefix of a token: 96k of the Python grammar's 98k nodes) looked
        up by a fingerprint and compared, kept while they hold few nodes in all."""
        if nodes.size <= MAX_SUBFRAME_KEY:
            key = (item, nodes.tobytes())
            hit = self._subframes.get(key)
            if hit is None:
                hit = self._subframes[key] = self._walk_below(item, nodes)
                if len(self._subframes) > MAX_CACHED_SUBFRAMES:
                    self._subframes.popitem(last=False)
            return hit
        fingerprint = (item, nodes.size, int(nodes[0]), int(nodes[-1]), int(nodes.sum()))
        entry = self._large_subframes.get(fingerprint)
        if entry is not None and np.array_equal(entry[0], nodes):
            self._large_subframes.move_to_end(fingerprint)
            return entry[1]
        hit = self._walk_below(item, nodes)
        if entry is not None:  # another set with the same fingerprint: replaced
            self._large_nodes -= entry[0].size + entry[1][1].size
        self._large_subframes[fingerprint] = (nodes, hit)
        self._large_nodes += nodes.size + hit[1].size
        while self._large_nodes > MAX_LARGE_SUBFRAME_NODES and self._large_subframes:
            kept, (below, ends) = self._large_subframes.popitem(last=False)[1]
            self._large_nodes -= kept.size + ends.size
        return hit

    def _walk_below(self, item: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        chain = self.pda.forced_chain(item)
        if chain:
            return self._read_chain(*chain, nodes)
        calls = self.pda.calls_alone(item)
        if calls and all(final or not empty for _, _, final, empty in calls):
            below, ends = self._compose_calls(calls, nodes)
            below.flags.writeable = False
            return below, ends
        below, ends = self._walker.subtrees_mask_and_events(
            nodes, self.pda.walled_state(item), lambda: self.pda.pops)
        below.flags.writeable = False
        return below, np.sort(ends)


class _Cycle(Exception):  # noqa: N818 - a signal, not an error
    """A frame's composition came back to a frame being composed."""


@njit(cache=True, nogil=True)
def _follow(node_class, size, tok_start, tok_ids, nodes, classes, words
            ):  # pragma: no cover - compiled
    """Set in ``words`` the tokens along the path of ``classes`` below each of ``nodes``
    (as far as the trie goes); return the nodes where a whole path ends, in order."""
    ends = np.empty(nodes.size, dtype=np.int64)
    n_ends = 0
    for k in range(nodes.size):
        node = nodes[k]
        for j in range(classes.size):
            child, end = node + 1, node + size[node]
            while child < end and node_class[child] != classes[j]:
                child += size[child]
            if child >= end:
                break
            node = child
            for i in range(tok_start[node], tok_start[node + 1]):
                t = tok_ids[i]
                words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            if j == classes.size - 1:
                ends[n_ends] = node
                n_ends += 1
    return ends[:n_ends]


@njit(cache=True, nogil=True)
def _union(a, b):  # pragma: no cover - compiled
    """The union of two sorted arrays of unique nodes, sorted (a merge)."""
    out = np.empty(a.size + b.size, dtype=np.int64)
    i = j = n = 0
    while i < a.size and j < b.size:
        if a[i] < b[j]:
            out[n] = a[i]
            i += 1
        elif b[j] < a[i]:
            out[n] = b[j]
            j += 1
        else:
            out[n] = a[i]
            i += 1
            j += 1
        n += 1
    while i < a.size:
        out[n] = a[i]
        i += 1
        n += 1
    while j < b.size:
        out[n] = b[j]
        j += 1
        n += 1
    return out[:n]


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


def _warm_up() -> None:
    """Load the compiled kernels now, not inside the first mask that needs them (see
    :func:`tether.engine.token_masks._warm_up`)."""
    one = np.zeros(1, dtype=np.int64)
    _union(one, one)
    _follow(np.zeros(1, dtype=np.int32), np.ones(1, dtype=np.int64), np.zeros(2, dtype=np.int64),
            one, one, np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.uint32))


_warm_up()
