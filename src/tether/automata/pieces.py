"""Bounded, process-wide caches of automaton *pieces* keyed by their content.

Many constraints share pieces: the value automaton of ``{"type": "string",
"maxLength": 255}``, of a ``format``, the keys that are not one of a few declared names,
the determinised ``Σ*``… A :class:`PieceCache` keeps such a piece once it is built, keyed
only by what determines it (never by where it sits in a schema, nor by the whole
constraint), so the result of a compile never depends on what was compiled before —
only how long it takes does.

Every cache is an LRU bounded both in entries and in total *weight* (roughly the edges
or table cells a piece holds; the caller says), so its memory is bounded whatever the
workload. Cached values are shared: they must be immutable (read-only numpy arrays,
frozen nodes). :func:`tether.compiler.clear_cache` does not empty these (they hold no
whole constraint); :func:`clear_piece_caches` does, for tests and measurements.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

_ALL: list[PieceCache] = []


class PieceCache(Generic[V]):
    """A thread-safe LRU of at most ``max_entries`` values of total weight at most
    ``max_weight`` (a value heavier than that alone is built but not kept)."""

    def __init__(self, name: str, *, max_entries: int, max_weight: int,
                 weight: Callable[[V], int] = lambda _: 1) -> None:
        self.name = name
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._weight_of = weight
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        _ALL.append(self)

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value of ``key``, built by ``build()`` on a miss (exceptions are not
        cached: the next call builds again)."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return hit[0]
            self.misses += 1
        value = build()
        w = max(1, int(self._weight_of(value)))
        if w > self.max_weight:
            return value
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (value, w)
                self._weight += w
                while len(self._entries) > self.max_entries or self._weight > self.max_weight:
                    _, (_, old) = self._entries.popitem(last=False)
                    self._weight -= old
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        return self._weight


def clear_piece_caches() -> None:
    """Empty every piece cache (the next compiles build their pieces again)."""
    for cache in _ALL:
        cache.clear()
