"""What rules that call no other rule read, shared by every compiled constraint of a
vocabulary.

A frame of a rule that calls no rule (a JSON string, a number, an enum: a *leaf* rule)
reads the same in every grammar that has the same rule, standing on the same byte
classes (:meth:`~tether.engine.pda.PushdownAutomaton.leaf_frame_key` says when two item
sets are alike). So what :mod:`tether.engine.pushdown` computes for one is kept here, per
vocabulary, for the next grammar — the schemas a server compiles share their plain
strings and numbers:

- :data:`FRAMES`: a leaf item set's frame, read from the trie's root (its inner mask, the
  trie nodes where it ends, whether it ends at once);
- :data:`BELOW`: what a leaf item set reads below a set of trie nodes (the tokens that
  continue below them, the nodes where it ends there) — the nodes where a key or a
  keyword ends, the same in every schema that has it.

Each store is bounded by its entries and the bytes of its arrays, each array counted
once however many entries hold it (least recently used first out), and safe to use from
several threads. The arrays it holds are read-only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

from tether.vocab import Vocabulary

MAX_FRAMES = 4096  # leaf-rule frames shared by every grammar of a process
MAX_FRAME_BYTES = 16 << 20  # and the bytes of their masks and trie nodes
MAX_BELOW = 16384  # what leaf item sets read below trie nodes
MAX_BELOW_BYTES = 16 << 20


class SharedStore:
    """Tuples of arrays (``None`` items allowed) keyed per vocabulary, least recently
    used first out past ``max_entries`` or ``max_bytes``."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._held: OrderedDict[tuple[str, Hashable], tuple] = OrderedDict()
        self._arrays: dict[int, list] = {}  # per array held (by id): [array, entries]
        self._bytes = 0  # of the arrays held, each once
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """The bytes of the arrays held (at most ``max_bytes`` but for the newest)."""
        return self._bytes

    def get(self, vocab: Vocabulary, key: Hashable) -> tuple | None:
        with self._lock:
            hit = self._held.get((vocab.fingerprint, key))
            if hit is not None:
                self._held.move_to_end((vocab.fingerprint, key))
            return hit

    def put(self, vocab: Vocabulary, key: Hashable, value: tuple) -> None:
        with self._lock:
            old = self._held.pop((vocab.fingerprint, key), None)
            if old is not None:
                self._release(old)
            self._held[(vocab.fingerprint, key)] = value
            self._hold(value)
            while len(self._held) > 1 and (len(self._held) > self.max_entries
                                           or self._bytes > self.max_bytes):
                self._release(self._held.popitem(last=False)[1])

    def _hold(self, value: tuple) -> None:
        """Count the arrays of ``value``: each array once however many entries hold it
        (a frame is kept under its own key and its shallow form's)."""
        for part in value:
            if isinstance(part, np.ndarray):
                held = self._arrays.get(id(part))
                if held is None:
                    self._arrays[id(part)] = [part, 1]
                    self._bytes += part.nbytes
                else:
                    held[1] += 1

    def _release(self, value: tuple) -> None:
        for part in value:
            if isinstance(part, np.ndarray):
                held = self._arrays[id(part)]
                held[1] -= 1
                if not held[1]:
                    del self._arrays[id(part)]
                    self._bytes -= part.nbytes

    def values(self) -> list[tuple]:
        with self._lock:
            return list(self._held.values())

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._arrays.clear()
            self._bytes = 0


FRAMES = SharedStore(MAX_FRAMES, MAX_FRAME_BYTES)
BELOW = SharedStore(MAX_BELOW, MAX_BELOW_BYTES)


def clear_shared_frames() -> None:
    """Forget what leaf rules read, shared across grammars (tests: compile from scratch)."""
    FRAMES.clear()
    BELOW.clear()


def shared_frame_bytes() -> int:
    """The bytes the shared leaf-rule pieces hold (each store within its bound)."""
    return FRAMES.bytes + BELOW.bytes
