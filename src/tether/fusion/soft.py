"""`SoftScore`: one soft domain's opinion of the next token, indexed by token id.

Scores lie in [-1, 1] (clamped; NaN counts as 0), 0 meaning "no opinion", scaled by a
per-score ``weight``. Three shapes, so a scorer never pays for more than it knows:

* dense — a float array indexed by token id (ids past its end have no opinion);
* sparse — ``{id: score}`` (or sorted id and value arrays, :meth:`SoftScore.sparse`);
* masked — one value for every token of a Bitmask (:meth:`SoftScore.from_mask`).

Dense arrays are used as given (clamped when read, during fusion); sparse values are
clamped once, here. A score adds itself to the adjustments of a fusion step in either of
the two forms of :mod:`tether.fusion.kernels`: at the feasible ids, or by token id. A
fusion result reads its scores when its adjustments are first asked for, so a score's
arrays are kept by reference: treat them as read-only once handed over (as masks are).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import Any

import numpy as np

from tether import bits
from tether.errors import TetherError
from tether.fusion import kernels

DENSE, SPARSE, MASKED = "dense", "sparse", "masked"


class SoftScore:
    """Scores by token id: ``SoftScore(dense_array_or_mapping, weight=1.0)``."""

    __slots__ = ("kind", "dense", "ids", "values", "words", "value", "weight")

    def __init__(self, scores: np.ndarray | Mapping[int, float], weight: float = 1.0) -> None:
        self.weight = _finite(weight, "weight")
        self.dense: np.ndarray | None = None
        self.ids: np.ndarray | None = None
        self.values: np.ndarray | None = None
        self.words: np.ndarray | None = None
        self.value = 0.0
        if isinstance(scores, Mapping):
            self.kind = SPARSE
            ids = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
            values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
            self._set_sparse(ids, values)
        else:
            self.kind = DENSE
            dense = np.asarray(scores)
            if dense.ndim != 1 or not (np.issubdtype(dense.dtype, np.floating)
                                       or np.issubdtype(dense.dtype, np.integer)):
                raise TetherError("dense scores must be a 1-D numeric array indexed by token id")
            if not np.issubdtype(dense.dtype, np.floating):
                dense = dense.astype(np.float64)
            self.dense = np.ascontiguousarray(dense)

    @classmethod
    def sparse(cls, ids: Any, values: Any, weight: float = 1.0) -> SoftScore:
        """Scores for the token ids ``ids`` (distinct), 0 elsewhere."""
        score = cls({}, weight)
        score._set_sparse(np.asarray(ids, dtype=np.int64).ravel(),
                          np.asarray(values, dtype=np.float64).ravel())
        return score

    @classmethod
    def from_mask(cls, words: np.ndarray, value: float, weight: float = 1.0) -> SoftScore:
        """``value`` for every token the Bitmask ``words`` allows, 0 elsewhere."""
        score = cls({}, weight)
        score.kind = MASKED
        score.words = np.ascontiguousarray(words, dtype=np.uint32)
        score.value = max(-1.0, min(1.0, _finite(value, "value")))
        return score

    def _set_sparse(self, ids: np.ndarray, values: np.ndarray) -> None:
        if ids.shape != values.shape:
            raise TetherError("sparse scores need as many values as ids")
        if ids.size and ids.min() < 0:
            raise TetherError(f"negative token id {int(ids.min())} in soft scores")
        order = np.argsort(ids, kind="stable")
        ids, values = ids[order], values[order]
        if ids.size > 1 and (ids[1:] == ids[:-1]).any():
            raise TetherError("duplicate token id in sparse soft scores")
        values = np.clip(np.nan_to_num(values, nan=0.0), -1.0, 1.0)
        self.ids, self.values = ids, values

    def add_at(self, adj: np.ndarray, ids: np.ndarray, feasible: np.ndarray,
               factor: float) -> None:
        """``adj[j] += factor · score[ids[j]]`` for the sorted feasible ``ids`` (the set
        bits of the Bitmask ``feasible``)."""
        if self.kind == DENSE:
            kernels.add_dense_at(adj, ids, self.dense, factor)
        elif self.kind == SPARSE:
            kernels.add_sparse_at(adj, ids, feasible, self.ids, self.values, factor)
        else:
            kernels.add_masked_at(adj, ids, self.words, factor * self.value)

    def add_to(self, adj: np.ndarray, factor: float) -> None:
        """``adj[t] += factor · score[t]`` for every token id ``t`` of ``adj``."""
        if self.kind == DENSE:
            kernels.add_dense(adj, self.dense, factor)
        elif self.kind == SPARSE:
            kernels.add_sparse(adj, self.ids, self.values, factor)
        else:
            kernels.add_masked(adj, bits.flags(self.words, adj.shape[0])[0],
                               factor * self.value)

    def to_dense(self, vocab_size: int) -> np.ndarray:
        """The clamped scores as a float64 array of ``vocab_size`` entries (for tests and
        diagnostics; fusion never builds it)."""
        out = np.zeros(vocab_size, dtype=np.float64)
        if self.kind == DENSE:
            n = min(vocab_size, self.dense.shape[0])
            out[:n] = np.clip(np.nan_to_num(self.dense[:n].astype(np.float64), nan=0.0), -1, 1)
        elif self.kind == SPARSE:
            keep = self.ids < vocab_size
            out[self.ids[keep]] = self.values[keep]
        else:
            bits = np.unpackbits(self.words.view(np.uint8), bitorder="little")[:vocab_size]
            out[: bits.shape[0]][bits.astype(bool)] = self.value
        return out

    def __repr__(self) -> str:
        return f"<SoftScore {self.kind} weight={self.weight}>"


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise TetherError(f"a soft score's {name} must be a finite number, not {value!r}")
    return float(value)
