"""`TokenTrie`: the byte trie over all non-special tokens of a vocabulary.

Built once per vocabulary and shared by every constraint compiled for it. Nodes are
numbered breadth first, so

* the nodes of depth ``d`` are ``level_start[d] : level_start[d + 1]``,
* the children of a node are contiguous: ``first_child[n] : first_child[n] + n_children[n]``,
  sorted by byte,
* node 0 is the root (the empty prefix).

``node_byte[n]`` is the byte on the edge into ``n``; token ``token_ids[k]`` ends at
``token_node[k]``. Several tokens may end at one node (equal bytes under different ids).
The arrays are saved to the on-disk cache keyed by the vocabulary's fingerprint.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from tether.cache_dir import arrays_cached

if TYPE_CHECKING:
    from tether.vocab.vocabulary import Vocabulary

_FORMAT = 2  # bump when the saved arrays change
_FIELDS = ("node_byte", "parent", "first_child", "n_children", "level_start",
           "token_ids", "token_node")


@dataclass(frozen=True)
class TokenTrie:
    """Breadth-first byte trie over the non-special tokens (see the module docstring)."""

    node_byte: np.ndarray    # uint8 [N]; node 0's entry is unused
    parent: np.ndarray       # int64 [N]; parent[0] == -1
    first_child: np.ndarray  # int64 [N]
    n_children: np.ndarray   # int64 [N]
    level_start: np.ndarray  # int64 [depth + 2]
    token_ids: np.ndarray    # int64 [T], sorted by token id
    token_node: np.ndarray   # int64 [T], node where token_ids[k] ends

    @property
    def n_nodes(self) -> int:
        return int(self.node_byte.shape[0])

    @property
    def depth(self) -> int:
        """Length in bytes of the longest token."""
        return int(self.level_start.shape[0]) - 2

    @cached_property
    def node_token(self) -> np.ndarray:
        """int64 [N]: the lowest token id ending at each node (-1: none)."""
        lowest = np.full(self.n_nodes, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(lowest, self.token_node, self.token_ids)
        lowest[lowest == np.iinfo(np.int64).max] = -1
        return lowest

    def longest_first(self, data: bytes) -> list[int] | None:
        """Token ids spelling ``data``, the longest token (the lowest id among equal ones)
        first at each position; ``None`` if some position starts no token."""
        out = np.empty(len(data), dtype=np.int64)
        n = _longest_first(np.frombuffer(data, dtype=np.uint8), self.node_byte,
                           self.first_child, self.n_children, self.node_token, out)
        return None if n < 0 else out[:n].tolist()

    def fewest(self, data: bytes) -> list[int] | None:
        """Token ids spelling ``data`` in as few tokens as any tokenization (ties: the
        longest token first); ``None`` if ``data`` has no tokenization."""
        out = np.empty(len(data), dtype=np.int64)
        n = _fewest(np.frombuffer(data, dtype=np.uint8), self.node_byte, self.first_child,
                    self.n_children, self.node_token, out)
        return None if n < 0 else out[:n].tolist()

    @classmethod
    def for_vocabulary(cls, vocab: Vocabulary) -> TokenTrie:
        """The trie of ``vocab``, from the on-disk cache when it is there."""
        arrays = arrays_cached(
            f"trie{_FORMAT}-{vocab.fingerprint}", _FIELDS,
            lambda: vars(cls.build(vocab.tokens, vocab.special)))
        return cls(**{f: arrays[f] for f in _FIELDS})

    @classmethod
    def build(cls, tokens: tuple[bytes, ...], special: np.ndarray) -> TokenTrie:
        """Build the trie of ``tokens[i]`` for every non-special, non-empty ``i``."""
        items = sorted((tokens[i], i) for i in range(len(tokens))
                       if not special[i] and tokens[i])
        # Depth-first (preorder) construction from the sorted strings: a token adds one
        # node per byte past its longest common prefix with the previous token.
        depth = [0]
        dfs_parent = [-1]
        dfs_byte = [0]
        path = [0]  # path[d] = node at depth d on the current branch
        prev = b""
        token_ids = np.empty(len(items), dtype=np.int64)
        token_dfs_node = np.empty(len(items), dtype=np.int64)
        for k, (text, tid) in enumerate(items):
            common = 0
            limit = min(len(prev), len(text))
            while common < limit and prev[common] == text[common]:
                common += 1
            del path[common + 1:]
            for d in range(common, len(text)):
                node = len(depth)
                depth.append(d + 1)
                dfs_parent.append(path[d])
                dfs_byte.append(text[d])
                path.append(node)
            token_ids[k] = tid
            token_dfs_node[k] = path[len(text)]
            prev = text
        depth_a = np.asarray(depth, dtype=np.int64)
        # Breadth-first renumbering: sort by (depth, preorder); siblings stay contiguous
        # and in byte order because preorder follows the sorted strings.
        order = np.lexsort((np.arange(depth_a.size), depth_a))
        new_id = np.empty_like(order)
        new_id[order] = np.arange(order.size)
        parent_dfs = np.asarray(dfs_parent, dtype=np.int64)[order]
        parent = np.where(parent_dfs >= 0, new_id[np.maximum(parent_dfs, 0)], -1)
        node_byte = np.asarray(dfs_byte, dtype=np.uint8)[order]
        n_nodes = order.size
        n_children = np.bincount(parent[1:], minlength=n_nodes).astype(np.int64)
        first_child = np.zeros(n_nodes, dtype=np.int64)
        has = n_children > 0
        # Children of the nodes are laid out in parent order after the root.
        starts = 1 + np.concatenate(([0], np.cumsum(n_children)[:-1]))
        first_child[has] = starts[has]
        max_depth = int(depth_a.max())
        level_start = np.searchsorted(depth_a[order], np.arange(max_depth + 2)).astype(np.int64)
        tok_order = np.argsort(token_ids, kind="stable")
        return cls(
            node_byte=node_byte,
            parent=parent.astype(np.int64),
            first_child=first_child,
            n_children=n_children,
            level_start=level_start,
            token_ids=token_ids[tok_order],
            token_node=new_id[token_dfs_node[tok_order]].astype(np.int64),
        )


@njit(cache=True, nogil=True)
def _child(node_byte, first_child, n_children, node, byte):  # pragma: no cover - compiled
    """The child of ``node`` on ``byte`` (-1: none); children are sorted by byte."""
    lo = first_child[node]
    top = lo + n_children[node]
    hi = top
    while lo < hi:
        mid = (lo + hi) // 2
        if node_byte[mid] < byte:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < top and node_byte[lo] == byte else -1


@njit(cache=True, nogil=True)
def _fewest(data, node_byte, first_child, n_children, node_token, out
            ):  # pragma: no cover - compiled
    """Segment ``data`` into ``out`` (see :meth:`TokenTrie.fewest`): the fewest tokens to
    the end from each position, back to front; returns the number of tokens, or -1."""
    size = data.size
    need = np.full(size + 1, -1, dtype=np.int64)  # tokens from position i to the end
    pick = np.full(size + 1, -1, dtype=np.int64)  # the token taken there
    step = np.zeros(size + 1, dtype=np.int64)     # and its length
    need[size] = 0
    for i in range(size - 1, -1, -1):
        node = 0
        j = i
        while j < size:
            node = _child(node_byte, first_child, n_children, node, data[j])
            if node < 0:
                break
            j += 1
            if node_token[node] >= 0 and need[j] >= 0 and \
                    (need[i] < 0 or need[j] + 1 <= need[i]):
                need[i] = need[j] + 1  # "<=": among equals the longer token wins
                pick[i] = node_token[node]
                step[i] = j - i
    if need[0] < 0:
        return -1
    n = 0
    i = 0
    while i < size:
        out[n] = pick[i]
        n += 1
        i += step[i]
    return n


@njit(cache=True, nogil=True)
def _longest_first(data, node_byte, first_child, n_children, node_token, out
                   ):  # pragma: no cover - compiled
    """Segment ``data`` into ``out`` (see :meth:`TokenTrie.longest_first`); returns the
    number of tokens, or -1."""
    n = 0
    at = 0
    while at < data.size:
        node = 0
        best = -1
        end = at
        j = at
        while j < data.size:
            node = _child(node_byte, first_child, n_children, node, data[j])
            if node < 0:
                break
            j += 1
            if node_token[node] >= 0:
                best = node_token[node]
                end = j
        if best < 0:
            return -1
        out[n] = best
        n += 1
        at = end
    return n


def _warm_up() -> None:
    """Load the compiled kernels now, not inside the first mask or budget that needs them
    (see :func:`tether.engine.token_masks._warm_up`); text comes in read-only (bytes)."""
    data = np.frombuffer(b"", dtype=np.uint8)
    node_byte, one = np.zeros(1, dtype=np.uint8), np.zeros(1, dtype=np.int64)
    for segment in (_longest_first, _fewest):
        segment(data, node_byte, one, one, one, np.empty(0, dtype=np.int64))


_warm_up()
