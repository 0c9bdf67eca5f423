"""Token masks of DFA states, computed by walking the vocabulary's byte trie.

For a DFA state ``s``, token ``t`` is allowed iff reading ``bytes(t)`` from ``s`` never
reaches ``DEAD`` (the DFA is trimmed, so every other state is a viable prefix). The walk
is a depth-first traversal of a trie of the tokens that follows the DFA alongside and
prunes a subtree as soon as its prefix is dead — the trie × automaton intersection. The
trie is stored in depth-first preorder with each node's subtree size, so the walk is a
forward scan of flat arrays that jumps over a dead subtree (``n += size[n]``), keeping
one automaton state per depth.

The DFA cannot tell apart bytes of one class, so the walk runs on a :class:`ClassTrie`:
the vocabulary's shared byte trie with each byte replaced by its class and equal paths
merged (built once per vocabulary and byte partition, at compile time; 500–7,000 nodes
instead of SmolLM2's 100,000 for the regexes of ``bench/``). The walk and the merge run
compiled by numba, whose machine code is cached on disk. Measured on SmolLM2: a state
that allows nearly every token takes ~10 ms walked level by level with numpy on the
byte trie, ~1.8 ms with numba on the byte trie, ~0.1 ms with numba on the class trie.

A walk below many nodes (what a grammar's frame reads after the nodes where the frame
below it may end: nearly every node, after an identifier) would look at each node's
children; when the state reads few classes first (no letter, after an identifier) it
starts instead from the trie's nodes of those classes whose parent is one of the nodes
(:meth:`TrieWalker.children_in_classes`): ~1,500 nodes instead of ~98,000.

The automaton is lazy: when the walk meets a row that is not built yet, it notes the
(trie node, state) pair and skips that subtree; the rows are then built in Python and the
walk resumes from the skipped subtrees only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from tether.automata.dfa import DEAD, UNKNOWN, LazyDFA
from tether.engine import bitmask
from tether.vocab import TokenTrie, Vocabulary


class TrieWalker:
    """Computes the masks of a DFA's states over one vocabulary."""

    def __init__(self, dfa: LazyDFA, vocab: Vocabulary, trie: ClassTrie | None = None) -> None:
        self.dfa = dfa
        self.vocab = vocab
        self.trie = trie if trie is not None else class_trie(vocab, dfa.class_of_byte,
                                                             dfa.n_classes)

    def mask(self, state: int) -> np.ndarray:
        """Bitmask words of the non-special tokens allowed from ``state``."""
        return self._run(self._root_start(state))[0]

    def mask_and_successors(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """The mask of ``state`` and the states its allowed tokens lead to."""
        words, reached, _ = self._run(self._root_start(state), successors=True)
        return words, np.flatnonzero(reached)

    def mask_and_events(self, state: int, flagged: Callable[[], np.ndarray]
                        ) -> tuple[np.ndarray, np.ndarray]:
        """The mask of ``state`` and the trie nodes (excluding the root) at which a walk
        from it enters a flagged state; ``flagged()`` returns the flags by state (a bool
        array covering every state built so far; it is asked again as states are
        added)."""
        words, _, events = self._run(self._root_start(state), flagged=flagged)
        return words, events

    def tokens_entering(self, state: int, flagged: Callable[[], np.ndarray]) -> np.ndarray:
        """Bitmask words of the tokens that, read from ``state``, end in a flagged state
        (``flagged`` as in :meth:`mask_and_events`): the tokens at the trie nodes
        entered in one (every token of a class-trie node ends in the same state)."""
        events = self.mask_and_events(state, flagged)[1]
        words = np.zeros(bitmask.n_words(self.vocab.size), dtype=np.uint32)
        mark_tokens(self.trie.tok_start, self.trie.tok_ids, events, words)
        return words

    def subtrees_mask(self, nodes: np.ndarray, state: int) -> np.ndarray:
        """The tokens that continue below trie ``nodes`` (the nodes' own tokens
        excluded), the bytes below each node being read from ``state``."""
        return self._run(self._below(nodes, state))[0]

    def subtrees_mask_and_events(self, nodes: np.ndarray, state: int,
                                 flagged: Callable[[], np.ndarray]
                                 ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`subtrees_mask` and, as in :meth:`mask_and_events`, the trie nodes below
        ``nodes`` at which the walk enters a flagged state."""
        words, _, events = self._run(self._below(nodes, state), flagged=flagged)
        return words, events

    def _below(self, nodes: np.ndarray, state: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where a walk below ``nodes`` from ``state`` starts: the subtrees below each
        node; or, below many nodes, the subtree of each child whose class ``state`` reads
        (found among the nodes of those classes, often far fewer than the nodes' children:
        what follows an identifier reads no letter first)."""
        trie = self.trie
        if nodes.size >= BY_CLASS_NODES:  # (before building the row by_class_pays reads)
            self.dfa.ensure_rows([state])
            live = np.flatnonzero(self.dfa.table[state] != DEAD)
            if self.by_class_pays(nodes, live):
                lo = self.children_in_classes(nodes, live)
                return lo, lo + trie.size[lo], np.full(lo.size, state, dtype=np.int64)
        return _below_ranges(nodes, trie.size, state)

    def by_class_pays(self, nodes: np.ndarray, classes: np.ndarray) -> bool:
        """Whether :meth:`children_in_classes` looks at fewer nodes than the children of
        ``nodes``: there are many nodes, and the trie has fewer nodes of ``classes``."""
        start = self.trie.class_start
        return (nodes.size >= BY_CLASS_NODES
                and int((start[classes + 1] - start[classes]).sum()) < nodes.size)

    def children_in_classes(self, nodes: np.ndarray, classes: np.ndarray) -> np.ndarray:
        """The children of trie ``nodes`` whose class is in ``classes`` (class by class,
        each in preorder), found among the trie's nodes of those classes."""
        trie = self.trie
        return _children_in_classes(nodes, trie.node_parent, trie.class_nodes,
                                    trie.class_start, classes, self._member)

    def _root_start(self, state: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.array([1], dtype=np.int64), np.array([self.trie.size[0]], dtype=np.int64),
                np.array([state], dtype=np.int64))

    def _run(self, starts: tuple[np.ndarray, np.ndarray, np.ndarray], *,
             successors: bool = False, flagged: Callable[[], np.ndarray] | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Walk the given subtrees (see ``_walk``): the mask; with ``successors``, the
        states reached, flagged; with ``flagged``, the trie nodes of the events (each
        once, in no particular order)."""
        trie = self.trie
        words = np.zeros(bitmask.n_words(self.vocab.size), dtype=np.uint32)
        # Pending ranges of preorder nodes lo..hi (whole subtrees, or the subtrees of
        # siblings), the bytes above them read from an automaton state.
        lo, hi, st = starts
        missing = self._missing
        reached = _NO_FLAGS
        events = self._events if flagged is not None else _NO_EVENTS
        noted = self._noted
        n_events = np.zeros(1, dtype=np.int64)
        try:
            while True:
                table = self.dfa.table
                if successors and reached.size < table.shape[0]:
                    reached = np.concatenate(
                        [reached, np.zeros(table.shape[0] - reached.size, np.bool_)])
                n_missing = _walk(table, trie.node_class, trie.size, trie.node_depth,
                                  trie.tok_start, trie.tok_ids, lo, hi, st, trie.depth, words,
                                  missing, reached, flagged() if flagged is not None else _NO_FLAGS,
                                  events, noted, n_events)
                if n_missing == 0:
                    if n_events[0] > events.size:  # some were not noted: again, with room
                        _SCRATCH.events = np.empty(2 * int(n_events[0]), dtype=np.int64)
                        noted[:] = False
                        return self._run(starts, successors=successors, flagged=flagged)
                    found = events[:n_events[0]].copy()
                    noted[found] = False
                    return words, reached, found
                if n_missing > _MAX_MISSING:  # too many to resume: build them, walk again
                    self.dfa.ensure_rows(self._distinct(missing[:, 1], table.shape[0]))
                    continue
                pending = missing[:n_missing].copy()
                self.dfa.ensure_rows(self._distinct(pending[:, 1], table.shape[0]))
                # The walk will read on below each pending node that has children, from the
                # state it moves to: build those rows now rather than in one more round.
                table = self.dfa.table
                below = _states_below(table, trie.node_class, trie.size, pending)
                self.dfa.ensure_rows(self._distinct(below, table.shape[0]))
                lo = pending[:, 0].copy()
                hi = lo + trie.size[lo]
                st = pending[:, 1].copy()
        except BaseException:  # (a row that cannot be built: the flags stay all False)
            noted[:] = False
            raise

    def _distinct(self, states: np.ndarray, n_states: int) -> list[int]:
        """The distinct values of ``states`` (all below ``n_states``)."""
        seen = getattr(_SCRATCH, "seen", None)
        if seen is None or seen.size < n_states:  # (all False between calls)
            seen = _SCRATCH.seen = np.zeros(max(n_states, 2 * (0 if seen is None
                                                               else seen.size)), np.bool_)
        return _distinct_states(states, seen).tolist()

    @property
    def _missing(self) -> np.ndarray:
        if not hasattr(_SCRATCH, "missing"):
            _SCRATCH.missing = np.empty((_MAX_MISSING, 2), dtype=np.int64)
        return _SCRATCH.missing

    @property
    def _member(self) -> np.ndarray:
        return _flags("member", self.trie.size.size)

    @property
    def _noted(self) -> np.ndarray:
        return _flags("noted", self.trie.size.size)

    @property
    def _events(self) -> np.ndarray:
        if not hasattr(_SCRATCH, "events"):
            _SCRATCH.events = np.empty(_MAX_EVENTS, dtype=np.int64)
        return _SCRATCH.events


# Scratch arrays of the walks, one set per thread, shared by every walker of the thread
# (a walk runs to its end before the next starts on the same thread): a constraint
# compiled per request must not carry its own (~0.5 MB each).
_SCRATCH = threading.local()
MAX_SCRATCH_FLAGS = 8  # flag arrays (one per trie size) a thread keeps


def _flags(name: str, size: int) -> np.ndarray:
    """This thread's all-False flags ``name`` for a trie of ``size`` nodes (the walks
    leave them all False)."""
    flags: dict[tuple[str, int], np.ndarray] = _SCRATCH.__dict__.setdefault("flags", {})
    hit = flags.get((name, size))
    if hit is None:
        if len(flags) >= MAX_SCRATCH_FLAGS:
            flags.clear()
        hit = flags[(name, size)] = np.zeros(size, dtype=np.bool_)
    return hit


@dataclass(frozen=True)
class ClassTrie:
    """The vocabulary's byte trie with edges relabelled by byte class and equal paths
    merged: tokens whose bytes fall in the same classes, position by position, end at
    the same node. Nodes are numbered in depth-first preorder (the root is 0): the
    subtree of node ``n`` is ``n .. n + size[n] - 1`` and its children are ``n + 1``,
    then each next sibling right after the previous one's subtree."""

    node_class: np.ndarray   # int32 [M]: class of the edge into the node
    size: np.ndarray         # int64 [M]: nodes in the node's subtree, itself included
    node_depth: np.ndarray   # int32 [M]: bytes from the root (0 for the root)
    tok_start: np.ndarray    # int64 [M + 1]: CSR of the tokens ending at each node
    tok_ids: np.ndarray      # int64 [T]
    depth: int               # the longest token, in bytes
    node_parent: np.ndarray  # int64 [M]: the parent (-1 for the root)
    class_nodes: np.ndarray  # int64 [M - 1]: the nodes but the root, by class, each in preorder
    class_start: np.ndarray  # int64 [C + 1]: where each class's nodes start in class_nodes
    # Per node met so far: the classes of its edges out, as the bits of an int (filled by
    # the pushdown engine's first-class check, for every grammar on this trie)
    child_classes: dict[int, int] = field(default_factory=dict, compare=False, repr=False)


_CLASS_TRIES: OrderedDict[tuple[str, bytes], ClassTrie] = OrderedDict()
_CLASS_TRIES_LOCK = threading.Lock()
MAX_CLASS_TRIES = 32


def class_trie(vocab: Vocabulary, class_of_byte: np.ndarray, n_classes: int) -> ClassTrie:
    """The :class:`ClassTrie` of ``vocab`` under a byte partition (cached, shared)."""
    key = (vocab.fingerprint, class_of_byte.astype(np.uint8).tobytes())
    with _CLASS_TRIES_LOCK:
        hit = _CLASS_TRIES.get(key)
        if hit is not None:
            _CLASS_TRIES.move_to_end(key)
            return hit
    built = _build_class_trie(vocab.trie, class_of_byte, n_classes)
    with _CLASS_TRIES_LOCK:
        _CLASS_TRIES[key] = built
        if len(_CLASS_TRIES) > MAX_CLASS_TRIES:
            _CLASS_TRIES.popitem(last=False)
    return built


def _build_class_trie(trie: TokenTrie, class_of_byte: np.ndarray, n_classes: int) -> ClassTrie:
    byte_class = class_of_byte[trie.node_byte]
    merged_id, parent, node_class = _merge_paths(trie.parent, byte_class, trie.level_start,
                                                 n_classes)
    order, size, node_depth = _preorder(parent)
    tok_start, tok_ids = _group_tokens(order[merged_id[trie.token_node]], trie.token_ids,
                                       parent.size)
    by_order = np.empty_like(order)
    by_order[order] = np.arange(order.size)
    node_class = node_class[by_order]
    node_parent = np.where(parent[by_order] < 0, -1, order[np.maximum(parent[by_order], 0)])
    class_start = np.zeros(n_classes + 1, dtype=np.int64)
    np.cumsum(np.bincount(node_class[1:], minlength=n_classes), out=class_start[1:])
    return ClassTrie(node_class=node_class, size=size[by_order],
                     node_depth=node_depth[by_order], tok_start=tok_start, tok_ids=tok_ids,
                     depth=trie.depth, node_parent=node_parent,
                     class_nodes=np.argsort(node_class[1:], kind="stable") + 1,
                     class_start=class_start)


@njit(cache=True, nogil=True)
def _preorder(parent):  # pragma: no cover - compiled
    """For a trie numbered breadth first with contiguous children (``parent[0] == -1``):
    each node's preorder number, subtree size and depth (by breadth-first number)."""
    n = parent.size
    size = np.ones(n, dtype=np.int64)
    for k in range(n - 1, 0, -1):
        size[parent[k]] += size[k]
    order = np.zeros(n, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    next_free = np.zeros(n, dtype=np.int64)  # where a node's next child goes
    next_free[0] = 1
    for k in range(1, n):
        p = parent[k]
        order[k] = next_free[p]
        next_free[p] += size[k]
        next_free[k] = order[k] + 1
        depth[k] = depth[p] + 1
    return order, size, depth


@njit(cache=True, nogil=True)
def _merge_paths(parent, byte_class, level_start, n_classes):  # pragma: no cover - compiled
    """Merge byte-trie nodes with equal class paths, level by level.

    Returns (class node of every byte node, parent and class of every class node). Class
    nodes are numbered breadth first and, within a level, by (parent, class), so the
    children of a node are contiguous.
    """
    n = parent.size
    merged = np.zeros(n, dtype=np.int64)
    out_parent = np.empty(n, dtype=np.int64)
    out_class = np.empty(n, dtype=np.int32)
    out_parent[0] = -1
    out_class[0] = 0
    n_out = 1
    prev_lo, prev_hi = 0, 1
    for d in range(1, level_start.size - 1):
        lo, hi = level_start[d], level_start[d + 1]
        if lo == hi:
            break
        size = hi - lo
        keys = np.empty(size, dtype=np.int64)
        for k in range(size):
            node = lo + k
            keys[k] = (merged[parent[node]] - prev_lo) * n_classes + byte_class[node]
        n_keys = (prev_hi - prev_lo) * n_classes
        level_first = n_out
        if n_keys <= 4 * size + 65536:  # dense keys: counting, no sort
            slot = np.full(n_keys, -1, dtype=np.int64)
            for k in range(size):
                slot[keys[k]] = 0
            for key in range(n_keys):
                if slot[key] == 0:
                    slot[key] = n_out
                    out_parent[n_out] = prev_lo + key // n_classes
                    out_class[n_out] = key % n_classes
                    n_out += 1
            for k in range(size):
                merged[lo + k] = slot[keys[k]]
        else:
            order = np.argsort(keys)
            last = -1
            for k in range(size):
                key = keys[order[k]]
                if key != last:
                    out_parent[n_out] = prev_lo + key // n_classes
                    out_class[n_out] = key % n_classes
                    n_out += 1
                    last = key
                merged[lo + order[k]] = n_out - 1
        prev_lo, prev_hi = level_first, n_out
    return merged, out_parent[:n_out].copy(), out_class[:n_out].copy()


@njit(cache=True, nogil=True)
def _group_tokens(token_node, token_ids, n_nodes):  # pragma: no cover - compiled
    """CSR of the tokens ending at each node (a counting sort by node)."""
    start = np.zeros(n_nodes + 1, dtype=np.int64)
    for k in range(token_node.size):
        start[token_node[k] + 1] += 1
    for i in range(n_nodes):
        start[i + 1] += start[i]
    fill = start[:-1].copy()
    ids = np.empty(token_node.size, dtype=np.int64)
    for k in range(token_node.size):
        node = token_node[k]
        ids[fill[node]] = token_ids[k]
        fill[node] += 1
    return start, ids


def _warm_up() -> None:
    """Load the compiled kernels now (from numba's disk cache after the first run), so
    the first constraint a process compiles does not pay for it."""
    table = np.zeros((1, 1), dtype=np.int32)
    empty = np.zeros(1, dtype=np.int64)
    _walk(table, np.zeros(1, dtype=np.int32), empty, np.zeros(1, dtype=np.int32),
          np.zeros(2, dtype=np.int64), empty, empty, empty, empty, 0,
          np.zeros(1, dtype=np.uint32),
          np.empty((1, 2), dtype=np.int64), _NO_FLAGS, _NO_FLAGS, _NO_EVENTS, _NO_FLAGS,
          np.zeros(1, dtype=np.int64))
    for nodes in (empty, read_only(empty)):  # (cached node sets are read-only: a variant)
        _below_ranges(nodes, np.ones(1, dtype=np.int64), 0)
    _children_in_classes(empty, empty, empty, np.zeros(2, dtype=np.int64), empty,
                         np.zeros(1, dtype=np.bool_))
    no_pairs = np.empty((0, 2), dtype=np.int64)
    for states in (empty, np.zeros((2, 2), dtype=np.int64)[:, 1]):  # (a column of pairs:
        _distinct_states(states, np.zeros(1, dtype=np.bool_))      # another layout)
    _states_below(table, np.zeros(1, dtype=np.int32), empty, no_pairs)
    _merge_paths(np.array([-1], dtype=np.int64), np.zeros(1, dtype=np.int32),
                 np.array([0, 1, 1], dtype=np.int64), 1)
    _group_tokens(empty, empty, 1)
    mark_tokens(np.zeros(2, dtype=np.int64), empty, empty, np.zeros(1, dtype=np.uint32))
    _preorder(np.array([-1], dtype=np.int64))


def read_only(array: np.ndarray) -> np.ndarray:
    """A read-only copy of ``array``: numba compiles a kernel apart for read-only arrays
    (the warm-ups load both)."""
    out = array.copy()
    out.flags.writeable = False
    return out


_MAX_MISSING = 1 << 14  # unbuilt transitions a walk can note to resume from
_MAX_EVENTS = 1 << 16  # flagged trie nodes a walk can note (beyond: walked again, noted)
BY_CLASS_NODES = 1024  # below this many nodes, children may be found by class
_NO_FLAGS = np.zeros(0, dtype=np.bool_)
_NO_EVENTS = np.zeros(0, dtype=np.int64)


@njit(cache=True, nogil=True)
def _distinct_states(states, seen):  # pragma: no cover - compiled
    """The distinct values of ``states``, in order of first appearance; ``seen`` (a flag
    per state, all False) is used as scratch and left all False."""
    out = np.empty(states.size, dtype=np.int64)
    n = 0
    for k in range(states.size):
        s = states[k]
        if not seen[s]:
            seen[s] = True
            out[n] = s
            n += 1
    for k in range(n):
        seen[out[k]] = False
    return out[:n]


@njit(cache=True, nogil=True)
def _states_below(table, node_class, size, pending):  # pragma: no cover - compiled
    """The live states that the (node, state before it) pairs of ``pending`` move to,
    for nodes with children: where the resumed walk reads on (repeats included)."""
    out = np.empty(pending.shape[0], dtype=np.int64)
    n = 0
    for k in range(pending.shape[0]):
        node = pending[k, 0]
        if size[node] > 1:
            s = table[pending[k, 1], node_class[node]]
            if s > DEAD:
                out[n] = s
                n += 1
    return out[:n]


@njit(cache=True, nogil=True)
def _below_ranges(nodes, size, state):  # pragma: no cover - compiled
    """The ranges of preorder nodes strictly below each of ``nodes`` that has children,
    each read from ``state``: (first, end, state) arrays for ``_walk``."""
    n = 0
    for k in range(nodes.size):
        if size[nodes[k]] > 1:
            n += 1
    lo = np.empty(n, dtype=np.int64)
    hi = np.empty(n, dtype=np.int64)
    st = np.full(n, state, dtype=np.int64)
    n = 0
    for k in range(nodes.size):
        node = nodes[k]
        if size[node] > 1:
            lo[n] = node + 1
            hi[n] = node + size[node]
            n += 1
    return lo, hi, st


@njit(cache=True, nogil=True)
def _children_in_classes(nodes, node_parent, class_nodes, class_start, classes, member
                         ):  # pragma: no cover - compiled
    """The nodes of each of ``classes`` whose parent is one of ``nodes`` (``member``, all
    False, is used as scratch and left all False)."""
    for k in range(nodes.size):
        member[nodes[k]] = True
    n = 0
    for c in classes:
        for i in range(class_start[c], class_start[c + 1]):
            n += member[node_parent[class_nodes[i]]]
    out = np.empty(n, dtype=np.int64)
    n = 0
    for c in classes:
        for i in range(class_start[c], class_start[c + 1]):
            child = class_nodes[i]
            if member[node_parent[child]]:
                out[n] = child
                n += 1
    for k in range(nodes.size):
        member[nodes[k]] = False
    return out


@njit(cache=True, nogil=True)
def mark_tokens(tok_start, tok_ids, nodes, words):  # pragma: no cover - compiled
    """Set in ``words`` the tokens at ``nodes``."""
    for k in range(nodes.size):
        mark_node(tok_start, tok_ids, nodes[k], words)


@njit(cache=True, nogil=True)
def mark_node(tok_start, tok_ids, node, words):  # pragma: no cover - compiled
    """Set in ``words`` the tokens at ``node``."""
    for i in range(tok_start[node], tok_start[node + 1]):
        t = tok_ids[i]
        words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


@njit(cache=True, nogil=True)
def _walk(table, node_class, size, node_depth, tok_start, tok_ids, start_lo, start_hi,
          start_state, depth, words, missing, reached, flagged, events, noted, n_events
          ):  # pragma: no cover - compiled
    """Set the bits of every token readable in the given ranges of preorder nodes: for
    each k, nodes ``start_lo[k]..start_hi[k] - 1`` (one subtree, or the subtrees of
    consecutive siblings), the bytes above them read from automaton state
    ``start_state[k]``. A node whose transition is not built yet is noted in ``missing``
    as (node, state before it) and its subtree skipped; returns how many were noted (more
    than ``len(missing)`` means some were not: then everything must be walked again). If
    ``reached`` is not empty, flag the state each allowed token ends in; if ``flagged``
    is not empty, append to ``events`` (counted by ``n_events[0]``) each node entered in
    a flagged state, once: ``noted`` marks the nodes appended (the caller clears it)."""
    st = np.empty(depth + 2, dtype=np.int64)  # st[d]: the state after d bytes
    n_missing = 0
    for k in range(start_lo.size):
        node = start_lo[k]
        stop = start_hi[k]
        if node >= stop:
            continue
        st[node_depth[node] - 1] = start_state[k]
        while node < stop:
            d = node_depth[node]
            state = st[d - 1]
            nxt = table[state, node_class[node]]
            if nxt == DEAD:
                node += size[node]
                continue
            if nxt == UNKNOWN:
                if n_missing < missing.shape[0]:
                    missing[n_missing, 0] = node
                    missing[n_missing, 1] = state
                n_missing += 1
                node += size[node]
                continue
            if flagged.size and flagged[nxt] and not noted[node]:
                if n_events[0] < events.size:
                    events[n_events[0]] = node
                    noted[node] = True
                n_events[0] += 1
            if tok_start[node] < tok_start[node + 1]:
                if reached.size:
                    reached[nxt] = True
                for j in range(tok_start[node], tok_start[node + 1]):
                    t = tok_ids[j]
                    words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            st[d] = nxt
            node += 1
    return n_missing


_warm_up()
