"""Frames shared by automaton states that read alike as deep as nearly every token goes.

A JSON string with ``maxLength: 256`` is an automaton that counts: after ``k``
characters it is in its own state, and each state's frame is a walk of the whole trie
(~1 ms with SmolLM2's byte trie) — one per character of every string the schema's
instances hold. Yet a token is at most a few dozen bytes: two states that read alike on
every string of up to ``shallow`` bytes have the same frame for every token of up to
``shallow`` bytes, and only the few longer ones can tell them apart.

So a state of a copied automaton (:class:`~tether.automata.nfa.CopiedMoves`) is keyed by
its *shallow form* (:func:`shallow_form`): a hash of what it reads and where it accepts
on the strings of up to ``shallow`` bytes, built depth by depth — equal forms read alike
to that depth, whichever automaton they come from: the ``k``-th character of a string
with ``maxLength: 256``, of one with ``maxLength: 40`` and of one with no bound read
alike while no bound is in reach. The frame walked for one state serves
every state with its form, in any grammar of the vocabulary
(:data:`tether.engine.shared_frames.FRAMES`), once its long tokens are read again from
the state itself over :class:`DeepTrie` — the paths to the tokens longer than
``shallow`` bytes, a small part of the trie (SmolLM2's byte trie: 243 tokens of over 15
bytes, 2,439 of its 100,298 nodes; DeepSeek-V4's: 248 of over 22 bytes, 4,056 of
274,693 nodes). ``shallow`` is chosen per trie: the least depth past which at most
:data:`MAX_DEEP_TOKENS` tokens go.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from numba import njit

from tether.automata.nfa import CopiedMoves
from tether.engine import bitmask
from tether.engine.token_masks import ClassTrie

MAX_DEEP_TOKENS = 256  # tokens longer than the shallow depth, at most
MAX_FORM_STATES = 4096  # (state, depth) pairs a shallow form may hold; past it: not keyed


@dataclass(frozen=True)
class DeepTrie:
    """The paths of a :class:`ClassTrie` to its tokens longer than ``shallow`` bytes:
    a trie itself (node 0 the root, preorder), ``main_node`` its nodes' numbers in the
    whole trie, ``tokens`` the bitmask words of the tokens longer than ``shallow``."""

    shallow: int
    trie: ClassTrie
    main_node: np.ndarray  # int64: per node, the same node in the whole trie
    tokens: np.ndarray  # uint32 words


_DEEP: dict[int, tuple[ClassTrie, DeepTrie]] = {}  # per id of a ClassTrie (held alive)
_DEEP_LOCK = threading.Lock()
MAX_DEEP_TRIES = 32


def deep_trie(trie: ClassTrie, vocab_size: int) -> DeepTrie:
    """The :class:`DeepTrie` of ``trie`` (cached per trie; class tries are shared)."""
    with _DEEP_LOCK:
        hit = _DEEP.get(id(trie))
        if hit is not None and hit[0] is trie:
            return hit[1]
    built = _build_deep_trie(trie, vocab_size)
    with _DEEP_LOCK:
        if len(_DEEP) >= MAX_DEEP_TRIES:
            _DEEP.clear()
        _DEEP[id(trie)] = (trie, built)
    return built


def _build_deep_trie(trie: ClassTrie, vocab_size: int) -> DeepTrie:
    token_depth = np.repeat(trie.node_depth.astype(np.int64), np.diff(trie.tok_start))
    longer = np.bincount(token_depth, minlength=trie.depth + 2)[::-1].cumsum()[::-1]
    # longer[d]: tokens of at least d bytes; shallow: the least depth past which few go
    shallow = int(np.flatnonzero(longer[1:] <= MAX_DEEP_TOKENS)[0])
    deep = trie.node_depth > shallow
    counted = np.concatenate([[0], np.cumsum(deep)])
    n = trie.size.size
    nodes = np.arange(n)
    keep = counted[nodes + trie.size] - counted[nodes] > 0  # a deep node in its subtree
    keep[0] = True
    main_node = np.flatnonzero(keep)
    kept = np.concatenate([[0], np.cumsum(keep)])
    size = kept[main_node + trie.size[main_node]] - kept[main_node]
    counts = trie.tok_start[main_node + 1] - trie.tok_start[main_node]
    tok_start = np.concatenate([[0], np.cumsum(counts)])
    firsts = np.repeat(trie.tok_start[main_node] - tok_start[:-1], counts)
    tok_ids = trie.tok_ids[firsts + np.arange(tok_start[-1])]
    parent = trie.node_parent[main_node]
    new_id = kept[:-1]  # (for kept nodes: their number among the kept)
    node_parent = np.where(parent < 0, -1, new_id[np.maximum(parent, 0)])
    node_class = trie.node_class[main_node]
    n_classes = trie.class_start.size - 1
    class_start = np.zeros(n_classes + 1, dtype=np.int64)
    np.cumsum(np.bincount(node_class[1:], minlength=n_classes), out=class_start[1:])
    sub = ClassTrie(node_class=node_class, size=size, node_depth=trie.node_depth[main_node],
                    tok_start=tok_start, tok_ids=tok_ids, depth=trie.depth,
                    node_parent=node_parent,
                    class_nodes=np.argsort(node_class[1:], kind="stable") + 1,
                    class_start=class_start)
    long_tokens = tok_ids[np.repeat(sub.node_depth > shallow, counts)]
    return DeepTrie(shallow=shallow, trie=sub, main_node=main_node,
                    tokens=bitmask.from_ids(long_tokens, vocab_size))


def shallow_key(moves: CopiedMoves, state: int, shallow: int) -> bytes | None:
    """The shallow form of ``state`` as a key (:func:`shallow_form`), or None if the form
    is too large or the moves are not those of a deterministic automaton."""
    form = shallow_form(moves, state, shallow)
    return None if form.size == 0 else form.tobytes()


def shallow_form(moves: CopiedMoves, state: int, shallow: int) -> np.ndarray:
    """What ``state`` reads on the strings of up to ``shallow`` bytes, as two 64-bit
    hashes (empty: more than :data:`MAX_FORM_STATES` states on the way, or moves that
    overlap). States are hashed depth by depth, deepest first: a state ``shallow`` bytes
    in by whether it accepts; one less deep by whether it accepts and its moves, each a
    run of classes with the hash of its target one byte deeper, consecutive runs with
    equal targets merged. So two states have equal forms when they read the same
    strings of up to ``shallow`` bytes and accept after the same ones — however their
    automata count: a string's ``k``-th character far from its length bounds has the
    form of any unbounded string's, in every schema."""
    return _shallow_form(moves.start, moves.lo, moves.hi, moves.target, moves.accepting,
                         state, shallow, MAX_FORM_STATES)


@njit(cache=True, nogil=True)
def _shallow_form(start, lo, hi, target, accepting, state, shallow, max_states
                  ):  # pragma: no cover - compiled
    # The states of each depth, in order found: layer d is order[first[d]:first[d + 1]];
    # while a layer is found, layer[s] == d + 1 says s is in layer d + 1 already.
    n = accepting.size
    layer = np.full(n, -1, dtype=np.int64)
    where = np.empty(n, dtype=np.int64)  # a state's place in the layer looked at
    order = np.empty(max_states, dtype=np.int64)
    first = np.empty(shallow + 2, dtype=np.int64)
    order[0] = state
    count = 1
    first[0], first[1] = 0, 1
    for d in range(shallow):
        for k in range(first[d], first[d + 1]):
            s = order[k]
            for e in range(start[s], start[s + 1]):
                if e > start[s] and lo[e] <= hi[e - 1]:
                    return np.zeros(0, dtype=np.uint64)
                t = target[e]
                if layer[t] != d + 1:
                    if count >= max_states:
                        return np.zeros(0, dtype=np.uint64)
                    layer[t] = d + 1
                    order[count] = t
                    count += 1
        first[d + 2] = count
    a = np.empty(count, dtype=np.uint64)  # the two hashes of each (state, depth)
    b = np.empty(count, dtype=np.uint64)
    for d in range(shallow, -1, -1):
        for k in range(first[d + 1], first[d + 2] if d < shallow else first[d + 1]):
            where[order[k]] = k  # (layer d + 1, whose hashes layer d reads)
        for k in range(first[d], first[d + 1]):
            s = order[k]
            x = _mix(np.uint64(1 + accepting[s]), np.uint64(0x243F6A8885A308D3))
            y = _mix(np.uint64(1 + accepting[s]), np.uint64(0x13198A2E03707344))
            if d < shallow:
                e = start[s]
                while e < start[s + 1]:  # a run of moves to targets of equal hashes
                    t = where[target[e]]
                    run_lo, run_hi = lo[e], hi[e]
                    e += 1
                    while e < start[s + 1] and lo[e] == run_hi + 1:
                        u = where[target[e]]
                        if a[u] != a[t] or b[u] != b[t]:
                            break
                        run_hi = hi[e]
                        e += 1
                    x = _mix(_mix(_mix(x, np.uint64(run_lo)), np.uint64(run_hi)), a[t])
                    y = _mix(_mix(_mix(y, np.uint64(run_lo)), np.uint64(run_hi)), b[t])
            a[k], b[k] = x, y
    return np.array([a[0], b[0]], dtype=np.uint64)


@njit(cache=True, nogil=True)
def _mix(h, x):  # pragma: no cover - compiled
    """``h`` with ``x`` mixed in (order matters): a 64-bit finalizer of their sum."""
    z = (h ^ (x + np.uint64(0x9E3779B97F4A7C15) + (h << np.uint64(6))
              + (h >> np.uint64(2))))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _warm_up() -> None:
    """Load the compiled kernel now, not inside the first mask that needs it (see
    :func:`tether.engine.token_masks._warm_up`)."""
    one = np.zeros(1, dtype=np.int64)
    _shallow_form(np.zeros(2, dtype=np.int64), one, one, one, np.zeros(1, dtype=np.bool_),
                  0, 1, 1)


_warm_up()
