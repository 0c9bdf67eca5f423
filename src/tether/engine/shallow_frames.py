"""Frames shared by automaton states that read alike as deep as nearly every token goes.

A JSON string with ``maxLength: 256`` is an automaton that counts: after ``k``
characters it is in its own state, and each state's frame is a walk of the whole trie
(~1 ms with SmolLM2's byte trie) — one per character of every string the schema's
instances hold. Yet a token is at most a few dozen bytes: two states that read alike on
every string of up to ``shallow`` bytes have the same frame for every token of up to
``shallow`` bytes, and only the few longer ones can tell them apart.

So a state of a copied automaton (:class:`~tether.automata.nfa.CopiedMoves`) is keyed by
its *shallow form* (:func:`shallow_form`): the states it reaches in fewer than
``shallow`` bytes, numbered in breadth-first order, with their moves and which of them
accept — equal forms read alike to that depth. The frame walked for one state serves
every state with its form, in any grammar of the vocabulary
(:data:`tether.engine.shared_frames.FRAMES`), once its long tokens are read again from
the state itself over :class:`DeepTrie` — the paths to the tokens longer than
``shallow`` bytes, a small part of the trie (SmolLM2's byte trie: 243 tokens of over 15
bytes, 2,439 of its 100,298 nodes; DeepSeek-V4's: 248 of over 22 bytes, 4,056 of
274,693 nodes). ``shallow`` is chosen per trie: the least depth past which at most
:data:`MAX_DEEP_TOKENS` tokens go.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

import numpy as np
from numba import njit

from tether.automata.nfa import CopiedMoves
from tether.engine import bitmask
from tether.engine.token_masks import ClassTrie

MAX_DEEP_TOKENS = 256  # tokens longer than the shallow depth, at most
MAX_FORM_STATES = 4096  # states a shallow form may hold; past it a state is not keyed


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
    """A digest of the shallow form of ``state`` (:func:`shallow_form`), or None if the
    form is too large or the moves are not those of a deterministic automaton."""
    form = shallow_form(moves, state, shallow)
    if form.size == 0:
        return None
    return hashlib.blake2b(form.tobytes(), digest_size=16).digest()


def shallow_form(moves: CopiedMoves, state: int, shallow: int) -> np.ndarray:
    """The states ``state`` reaches in fewer than ``shallow`` bytes (and those one byte
    further, by whether they accept), numbered in breadth-first order: per state, whether
    it accepts, how many moves it has and each move's ``lo``, ``hi`` and target number
    (targets past the depth have no moves listed). Two states with equal forms accept
    the same strings of up to ``shallow`` bytes. Empty: too many states
    (:data:`MAX_FORM_STATES`), or moves that overlap."""
    return _shallow_form(moves.start, moves.lo, moves.hi, moves.target, moves.accepting,
                         state, shallow, MAX_FORM_STATES)


@njit(cache=True, nogil=True)
def _shallow_form(start, lo, hi, target, accepting, state, shallow, max_states
                  ):  # pragma: no cover - compiled
    number = {state: 0}
    order = [state]
    depth = [0]
    out = [0]
    out.clear()
    k = 0
    while k < len(order):
        s = order[k]
        out.append(1 if accepting[s] else 0)
        if depth[k] >= shallow:
            out.append(-1)
            k += 1
            continue
        out.append(start[s + 1] - start[s])
        for e in range(start[s], start[s + 1]):
            if e > start[s] and lo[e] <= hi[e - 1]:
                return np.zeros(0, dtype=np.int64)
            t = target[e]
            if t not in number:
                if len(order) >= max_states:
                    return np.zeros(0, dtype=np.int64)
                number[t] = len(order)
                order.append(t)
                depth.append(depth[k] + 1)
            out.append(lo[e])
            out.append(hi[e])
            out.append(number[t])
        k += 1
    return np.array(out, dtype=np.int64)


def _warm_up() -> None:
    """Load the compiled kernel now, not inside the first mask that needs it (see
    :func:`tether.engine.token_masks._warm_up`)."""
    one = np.zeros(1, dtype=np.int64)
    _shallow_form(np.zeros(2, dtype=np.int64), one, one, one, np.zeros(1, dtype=np.bool_),
                  0, 1, 1)


_warm_up()
