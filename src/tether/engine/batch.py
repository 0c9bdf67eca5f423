"""Masks and steps for a batch of sequences at once: what a server does every step.

``fill_masks(matchers, out)`` writes the mask of matcher ``i`` into row ``i`` of a
``(batch, words)`` uint32 array (int32 accepted: the layout torch kernels take), and
``consume_tokens(matchers, tokens)`` advances each matcher on its token, reporting a
refused token per row instead of stopping the batch. With ``threads > 1`` the rows are
spread over a thread pool (a persistent one per thread count): a mask cached for its
state is a copy, and a new one is mostly trie walks in compiled kernels that release
the GIL, so threads overlap those; the Python that composes a new pushdown mask still
holds the GIL (docs/architecture.md, "Batches").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Protocol

import numpy as np

from tether.engine import bitmask
from tether.engine.matcher import Matcher
from tether.errors import TetherError
from tether.vocab import Vocabulary

MAX_THREADS = 64

_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


class Masked(Protocol):
    """What has a mask: a :class:`~tether.engine.matcher.Matcher`, a
    :class:`~tether.session.Session` (its budget included)."""

    vocab: Vocabulary

    def mask(self) -> np.ndarray: ...


def fill_masks(matchers: Sequence[Masked | None], out: np.ndarray, *,
               threads: int = 1) -> None:
    """Write each matcher's mask into its row of ``out``: row ``i`` gets the Bitmask
    words of ``matchers[i]`` (a matcher or a session; words past the vocabulary's are
    zeroed), or every bit set for ``None`` (a row nothing constrains). ``out`` is
    C-contiguous, 2-D, uint32 or int32, with at least ``len(matchers)`` rows and the
    vocabulary's words; rows past the matchers are left as they are."""
    rows = _rows(out, len(matchers))
    needed = max((bitmask.n_words(m.vocab.size) for m in matchers if m is not None),
                 default=0)
    if rows.shape[1] < needed:
        raise ValueError(f"fill_masks: out has {rows.shape[1]} words per row; the "
                         f"vocabulary needs {needed}")

    def fill(i: int) -> None:
        matcher = matchers[i]
        if matcher is None:
            rows[i] = 0xFFFFFFFF
            return
        words = matcher.mask()
        rows[i, :words.size] = words
        rows[i, words.size:] = 0

    _spread(fill, len(matchers), threads)


def consume_tokens(matchers: Sequence[Matcher | None], tokens: Sequence[int], *,
                   threads: int = 1) -> list[TetherError | None]:
    """Advance each matcher on its token (``None`` rows are skipped); the error each
    row met (``ConstraintViolation`` for a refused token, ``TokenIdError`` for a bad
    id; the matcher's state unchanged), or None."""
    if len(tokens) != len(matchers):
        raise ValueError(f"consume_tokens: {len(tokens)} tokens for {len(matchers)} matchers")
    errors: list[TetherError | None] = [None] * len(matchers)

    def consume(i: int) -> None:
        matcher = matchers[i]
        if matcher is not None:
            try:
                matcher.consume(tokens[i])
            except TetherError as e:
                errors[i] = e

    _spread(consume, len(matchers), threads)
    return errors


def _rows(out: np.ndarray, n: int) -> np.ndarray:
    """``out`` as uint32 rows (a view), checked."""
    if not isinstance(out, np.ndarray) or out.ndim != 2 or out.dtype not in (np.uint32,
                                                                              np.int32):
        raise ValueError("fill_masks: out must be a 2-D uint32 (or int32) numpy array")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("fill_masks: out must be C-contiguous and writeable")
    if out.shape[0] < n:
        raise ValueError(f"fill_masks: out has {out.shape[0]} rows for {n} matchers")
    return out.view(np.uint32)


def _spread(work: Callable[[int], None], n: int, threads: int) -> None:
    """Run ``work(i)`` for every row, on ``threads`` threads (rows interleaved); an
    exception stops its thread's rows and is raised once every thread has stopped."""
    if not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be between 1 and {MAX_THREADS}, not {threads}")
    threads = min(threads, n)
    if threads <= 1:
        for i in range(n):
            work(i)
        return

    def share(first: int) -> None:
        for i in range(first, n, threads):
            work(i)

    pool = _pool(threads)
    futures = [pool.submit(share, k) for k in range(threads)]
    wait(futures)
    for future in futures:
        future.result()


def _pool(threads: int) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = ThreadPoolExecutor(threads,
                                                       thread_name_prefix="tether-batch")
        return pool
