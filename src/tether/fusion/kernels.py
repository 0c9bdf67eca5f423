"""The per-token arithmetic of fusion, compiled by numba (machine code cached on disk).

Each kernel touches only what a step needs: the set bits of the feasible Bitmask, and
the soft scores at those ids — never a pass over the whole vocabulary per domain.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# ctz of a power of two 2^k: _DEBRUIJN[(2^k * 0x077CB531 mod 2^32) >> 27] == k
_DEBRUIJN = np.array([0, 1, 28, 2, 29, 14, 24, 3, 30, 22, 20, 15, 25, 17, 4, 8,
                      31, 27, 13, 23, 21, 19, 16, 7, 26, 12, 18, 6, 11, 5, 10, 9],
                     dtype=np.int64)
# For each byte value: the positions of its set bits (padded with 0), and how many.
_BYTE_BITS = np.array([[k for k in range(8) if b >> k & 1] + [0] * (8 - bin(b).count("1"))
                       for b in range(256)], dtype=np.uint8)
_BYTE_COUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)


@njit(cache=True, nogil=True)
def _popcount(x: int) -> int:
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return ((x * 0x01010101) & 0xFFFFFFFF) >> 24


@njit(cache=True, nogil=True)
def count_bits(words: np.ndarray) -> int:
    """Number of set bits of a Bitmask."""
    n = 0
    for w in range(words.shape[0]):
        n += _popcount(np.int64(words[w]))
    return n


@njit(cache=True, nogil=True)
def intersect(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = a & b & c`` (pass a mask twice to AND fewer); returns the set bits' ids."""
    n = 0
    for w in range(out.shape[0]):
        x = a[w] & b[w] & c[w]
        out[w] = x
        n += _popcount(np.int64(x))  # branch-free: the loop vectorises
    return _extract(out, n)


@njit(cache=True, nogil=True)
def _extract(words: np.ndarray, count: int) -> np.ndarray:
    """The ids of the ``count`` set bits of ``words``, in order, three ways by density.

    Under one bit per word on average, the non-zero words are listed first without
    branching, then their bits walked: branching on every word mispredicts on most of
    them (about 3x slower once the predictor is cold, as between two decoding steps).
    Over eight bits per word, every byte writes its bits' ids from a table without
    branching (flat ~0.5 ns per token). In between, every word's bits are walked.
    """
    n_words = words.shape[0]
    if count > 8 * n_words:
        return _extract_dense(words.view(np.uint8), count)
    out = np.empty(count, dtype=np.int64)
    if count > n_words:
        n = 0
        for w in range(n_words):
            n = _walk_bits(np.int64(words[w]), w << 5, out, n)
        return out
    nonzero = np.empty(n_words, dtype=np.int64)
    m = 0
    for w in range(n_words):
        nonzero[m] = w
        m += words[w] != 0
    n = 0
    for k in range(m):
        w = nonzero[k]
        n = _walk_bits(np.int64(words[w]), w << 5, out, n)
    return out


@njit(cache=True, nogil=True)
def _extract_dense(data: np.ndarray, count: int) -> np.ndarray:
    out = np.empty(count + 8, dtype=np.int64)
    n = 0
    for i in range(data.shape[0]):
        b = data[i]
        base = i << 3
        for k in range(8):
            out[n + k] = base + _BYTE_BITS[b, k]
        n += _BYTE_COUNT[b]
    return out[:count]


@njit(cache=True, nogil=True, inline="always")
def _walk_bits(x: int, base: int, out: np.ndarray, n: int) -> int:
    while x != 0:
        low = x & -x
        out[n] = base + _DEBRUIJN[((low * 0x077CB531) & 0xFFFFFFFF) >> 27]
        n += 1
        x ^= low
    return n


@njit(cache=True, nogil=True)
def add_dense(adj: np.ndarray, ids: np.ndarray, scores: np.ndarray, factor: float) -> None:
    """``adj[j] += factor * clamp(scores[ids[j]])`` (ids past the array: no opinion)."""
    f, lo, hi, zero = np.float32(factor), np.float32(-1.0), np.float32(1.0), np.float32(0.0)
    for j in range(np.searchsorted(ids, scores.shape[0])):  # ids are sorted
        v = scores[ids[j]]
        if v != v:  # NaN: no opinion
            v = zero
        adj[j] += f * min(hi, max(lo, v))


@njit(cache=True, nogil=True)
def add_sparse(adj: np.ndarray, ids: np.ndarray, feasible: np.ndarray,
               score_ids: np.ndarray, values: np.ndarray, factor: float) -> None:
    """Add ``factor * values[k]`` at the position of ``score_ids[k]`` in the sorted
    feasible ``ids`` when that token is feasible (a bit test on the Bitmask first).

    Positions come from a binary search of ``ids`` while few scored tokens are expected
    to be feasible; otherwise from ranks in the Bitmask (set bits of the words before,
    a prefix sum over the words, plus those below the token in its word), which avoids
    thousands of searches through a large, cold id array.
    """
    n_words = feasible.shape[0]
    expected_hits = score_ids.shape[0] * ids.shape[0] / (32.0 * n_words)
    if expected_hits * np.log2(ids.shape[0] + 2) < n_words:
        for k in range(score_ids.shape[0]):
            t = score_ids[k]
            w = t >> 5
            if w < n_words and (np.int64(feasible[w]) >> (t & 31)) & 1:
                adj[np.searchsorted(ids, t)] += factor * values[k]
        return
    before = np.empty(n_words, dtype=np.int64)
    total = 0
    for w in range(n_words):
        before[w] = total
        total += _popcount(np.int64(feasible[w]))
    for k in range(score_ids.shape[0]):
        t = score_ids[k]
        w = t >> 5
        if w < n_words:
            x = np.int64(feasible[w])
            bit = np.int64(1) << (t & 31)
            if x & bit:
                adj[before[w] + _popcount(x & (bit - 1))] += factor * values[k]


@njit(cache=True, nogil=True)
def add_masked(adj: np.ndarray, ids: np.ndarray, words: np.ndarray, delta: float) -> None:
    """``adj[j] += delta`` where the Bitmask ``words`` has token ``ids[j]``."""
    n_words = words.shape[0]
    for j in range(ids.shape[0]):
        t = ids[j]
        w = t >> 5
        if w < n_words and (np.int64(words[w]) >> (t & 31)) & 1:
            adj[j] += delta
