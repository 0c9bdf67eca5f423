"""Kernels over Bitmask words (the layout of :mod:`tether.engine.bitmask`), compiled by
numba (machine code cached on disk) and shared by fusion and sampling: counting set
bits, listing their ids, and expanding words into one 0/1 byte per token, the form that
vectorised passes over a row of logits read. (numba caches a kernel's machine code by
its own source file: after changing :func:`popcount`, clear the caches of the fusion
kernels that inline it.)
"""

from __future__ import annotations

import numpy as np
from numba import njit

# ctz of a power of two 2^k: _DEBRUIJN[(2^k * 0x077CB531 mod 2^32) >> 27] == k
_DEBRUIJN = np.array([0, 1, 28, 2, 29, 14, 24, 3, 30, 22, 20, 15, 25, 17, 4, 8,
                      31, 27, 13, 23, 21, 19, 16, 7, 26, 12, 18, 6, 11, 5, 10, 9],
                     dtype=np.int64)
# For each byte value: the positions of its set bits (padded with 0), how many, and its
# eight bits as eight 0/1 bytes of one little-endian uint64.
_BYTE_BITS = np.array([[k for k in range(8) if b >> k & 1] + [0] * (8 - bin(b).count("1"))
                       for b in range(256)], dtype=np.uint8)
_BYTE_COUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)
_BYTE_FLAGS = np.array([sum((b >> k & 1) << (8 * k) for k in range(8)) for b in range(256)],
                       dtype=np.uint64)


@njit(cache=True, nogil=True)
def popcount(x: int) -> int:
    """Number of set bits of a 32-bit word."""
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return ((x * 0x01010101) & 0xFFFFFFFF) >> 24


@njit(cache=True, nogil=True)
def count_bits(words: np.ndarray) -> int:
    """Number of set bits of a Bitmask."""
    n = 0
    for w in range(words.shape[0]):
        n += popcount(np.int64(words[w]))
    return n


@njit(cache=True, nogil=True)
def set_bits(words: np.ndarray, count: int) -> np.ndarray:
    """The ids of the ``count`` set bits of ``words``, in order, three ways by density.

    Under one bit per word on average, the non-zero words are listed first without
    branching, then their bits walked: branching on every word mispredicts on most of
    them (about 3x slower once the predictor is cold, as between two decoding steps).
    Over eight bits per word, every byte writes its bits' ids from a table without
    branching (flat ~0.5 ns per token). In between, every word's bits are walked.
    """
    n_words = words.shape[0]
    if count > 8 * n_words:
        return _set_bits_dense(words.view(np.uint8), count)
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
def _set_bits_dense(data: np.ndarray, count: int) -> np.ndarray:
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


def flags(words: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """One 0/1 byte per token of a row of ``size`` (tokens past the mask: 0), and how
    many are 1."""
    words = np.ascontiguousarray(words, dtype=np.uint32).reshape(-1)
    out = np.empty((size + 31) & ~31, dtype=np.uint8)
    count = _expand(words, out)
    if out.shape[0] > size:  # bits past the row do not count
        count -= int(np.count_nonzero(out[size:]))
    return out[:size], count


@njit(cache=True, nogil=True)
def _expand(words: np.ndarray, out: np.ndarray) -> int:
    """Write the bits of ``words`` as bytes into ``out`` (zeros past the words); the
    number of set bits written."""
    data = words.view(np.uint8)
    lanes = out.view(np.uint64)
    m = min(data.shape[0], lanes.shape[0])
    count = 0
    for q in range(m):
        b = data[q]
        lanes[q] = _BYTE_FLAGS[b]
        count += _BYTE_COUNT[b]
    for q in range(m, lanes.shape[0]):
        lanes[q] = 0
    return count
