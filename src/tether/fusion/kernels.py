"""The per-token arithmetic of fusion, compiled by numba (machine code cached on disk).

A step itself only ANDs the hard masks and counts what survives (:func:`intersect`,
O(words)). The soft step is computed later, on demand, in one of two forms:

* by position in the sorted feasible ids (the ``*_at`` kernels): touches only the set
  bits of the feasible Bitmask and the scores at those ids — the form of
  ``FusionResult.logit_adjustments``, and the cheap one when few tokens are feasible;
* dense, by token id over the whole vocabulary (:func:`add_dense`, :func:`add_sparse`,
  :func:`add_masked`, then :func:`combine` with the logits under the feasible flags):
  branch-free passes whose cost does not depend on how many tokens are feasible.

Both forms add the same terms in the same order with the same float32 arithmetic.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tether.bits import popcount

_NEG_INF = np.float32(-np.inf)
_LO, _HI, _ZERO = np.float32(-1.0), np.float32(1.0), np.float32(0.0)


@njit(cache=True, nogil=True)
def intersect(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray) -> int:
    """``out = a & b & c`` (pass a mask twice to AND fewer); returns its set bits."""
    n = 0
    for w in range(out.shape[0]):
        x = a[w] & b[w] & c[w]
        out[w] = x
        n += popcount(np.int64(x))  # branch-free: the loop vectorises
    return n


@njit(cache=True, nogil=True, inline="always")
def _clamped(v):  # noqa: ANN001, ANN202 - numba infers the float type
    """``v`` clamped to [-1, 1], NaN as 0 (no opinion), without branching."""
    c = v if v < _HI else (_HI if v >= _HI else _ZERO)
    return c if c > _LO else _LO


# -- by position in the sorted feasible ids --------------------------------------------------
@njit(cache=True, nogil=True)
def add_dense_at(adj: np.ndarray, ids: np.ndarray, scores: np.ndarray, factor: float) -> None:
    """``adj[j] += factor * clamp(scores[ids[j]])`` (ids past the array: no opinion)."""
    f = np.float32(factor)
    for j in range(np.searchsorted(ids, scores.shape[0])):  # ids are sorted
        adj[j] += f * _clamped(scores[ids[j]])


@njit(cache=True, nogil=True)
def add_sparse_at(adj: np.ndarray, ids: np.ndarray, feasible: np.ndarray,
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
        total += popcount(np.int64(feasible[w]))
    for k in range(score_ids.shape[0]):
        t = score_ids[k]
        w = t >> 5
        if w < n_words:
            x = np.int64(feasible[w])
            bit = np.int64(1) << (t & 31)
            if x & bit:
                adj[before[w] + popcount(x & (bit - 1))] += factor * values[k]


@njit(cache=True, nogil=True)
def add_masked_at(adj: np.ndarray, ids: np.ndarray, words: np.ndarray, delta: float) -> None:
    """``adj[j] += delta`` where the Bitmask ``words`` has token ``ids[j]``."""
    n_words = words.shape[0]
    for j in range(ids.shape[0]):
        t = ids[j]
        w = t >> 5
        if w < n_words and (np.int64(words[w]) >> (t & 31)) & 1:
            adj[j] += delta


# -- dense, by token id ----------------------------------------------------------------------
@njit(cache=True, nogil=True)
def add_dense(adj: np.ndarray, scores: np.ndarray, factor: float) -> None:
    """``adj[t] += factor * clamp(scores[t])`` (ids past ``scores``: no opinion)."""
    f = np.float32(factor)
    for t in range(min(adj.shape[0], scores.shape[0])):
        adj[t] += f * _clamped(scores[t])


@njit(cache=True, nogil=True)
def add_sparse(adj: np.ndarray, ids: np.ndarray, values: np.ndarray, factor: float) -> None:
    """``adj[ids[k]] += factor * values[k]`` (ids past ``adj`` are ignored)."""
    for k in range(ids.shape[0]):
        t = ids[k]
        if t < adj.shape[0]:
            adj[t] += factor * values[k]


@njit(cache=True, nogil=True)
def add_masked(adj: np.ndarray, flags: np.ndarray, delta: float) -> None:
    """``adj[t] += delta`` where ``flags[t]`` is 1."""
    for t in range(min(adj.shape[0], flags.shape[0])):
        if flags[t]:
            adj[t] += delta


@njit(cache=True, nogil=True)
def combine(out: np.ndarray, logits: np.ndarray, flags: np.ndarray, adj: np.ndarray,
            masked: bool) -> None:
    """``out[t] = logits[t] + adj[t]`` where ``flags[t]`` is 1 (``adj`` empty: no
    adjustment); elsewhere ``-inf`` if ``masked``, else ``logits[t]``. Entries past the
    flags count as not feasible."""
    n = min(out.shape[0], flags.shape[0])
    if adj.shape[0]:
        for t in range(n):
            x = logits[t]
            out[t] = x + adj[t] if flags[t] else (_NEG_INF if masked else x)
    else:
        for t in range(n):
            x = logits[t]
            out[t] = x if flags[t] else (_NEG_INF if masked else x)
    for t in range(n, out.shape[0]):
        out[t] = _NEG_INF if masked else logits[t]
