"""Token masks of DFA states, computed by walking the vocabulary's byte trie.

For a DFA state ``s``, token ``t`` is allowed iff reading ``bytes(t)`` from ``s`` never
reaches ``DEAD`` (the DFA is trimmed, so every other state is a viable prefix). The walk
is a depth-first traversal of the shared :class:`~tether.vocab.TokenTrie` that follows the
DFA alongside and prunes a subtree as soon as its prefix is dead — the trie × automaton
intersection. It runs compiled by numba (about 20–30× faster than the same walk
vectorised level by level with numpy: ~0.4 ms instead of ~10 ms for a state that allows
nearly all of a 49k vocabulary), and its machine code is cached on disk.

The DFA is lazy: when the walk meets a row that is not built yet, it notes the state and
skips that subtree; the rows are then built in Python and the walk is run again.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tether.automata.dfa import DEAD, UNKNOWN, LazyDFA
from tether.engine import bitmask
from tether.vocab import Vocabulary


class TrieWalker:
    """Computes the masks of a DFA's states over one vocabulary."""

    def __init__(self, dfa: LazyDFA, vocab: Vocabulary) -> None:
        self.dfa = dfa
        self.vocab = vocab
        trie = vocab.trie
        self._first_child = trie.first_child
        self._n_children = trie.n_children
        self._tok_start, self._tok_ids = trie.tokens_by_node
        # The byte class of the edge into every trie node, for this DFA.
        self._node_class = dfa.class_of_byte[trie.node_byte].astype(np.int32)
        self._depth = trie.depth

    def mask(self, state: int) -> np.ndarray:
        """Bitmask words of the non-special tokens allowed from ``state``."""
        words = np.zeros(bitmask.n_words(self.vocab.size), dtype=np.uint32)
        while True:
            words[:] = 0
            table = self.dfa.table
            missing = np.empty(64, dtype=np.int64)
            seen = np.zeros(table.shape[0], dtype=np.bool_)
            n_missing = _walk(table, self._node_class, self._first_child, self._n_children,
                              self._tok_start, self._tok_ids, state, self._depth, words,
                              missing, seen)
            if n_missing == 0:
                return words
            self.dfa.ensure_rows(missing[:min(n_missing, missing.size)].tolist())


@njit(cache=True, nogil=True)
def _walk(table, node_class, first_child, n_children, tok_start, tok_ids, start_state,
          depth, words, missing, seen):  # pragma: no cover - compiled
    """Set the bits of every token readable from ``start_state``; return how many
    states with unbuilt rows were met (their ids go to ``missing``)."""
    lo = np.empty(depth + 2, dtype=np.int64)
    hi = np.empty(depth + 2, dtype=np.int64)
    st = np.empty(depth + 2, dtype=np.int64)
    n_missing = 0
    sp = 0
    lo[0] = first_child[0]
    hi[0] = first_child[0] + n_children[0]
    st[0] = start_state
    while sp >= 0:
        if lo[sp] == hi[sp]:
            sp -= 1
            continue
        node = lo[sp]
        lo[sp] += 1
        state = st[sp]
        nxt = table[state, node_class[node]]
        if nxt == DEAD:
            continue
        if nxt == UNKNOWN:
            if not seen[state]:
                seen[state] = True
                if n_missing < missing.size:
                    missing[n_missing] = state
                n_missing += 1
            continue
        for k in range(tok_start[node], tok_start[node + 1]):
            t = tok_ids[k]
            words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        if n_children[node] > 0:
            sp += 1
            lo[sp] = first_child[node]
            hi[sp] = first_child[node] + n_children[node]
            st[sp] = nxt
    return n_missing
