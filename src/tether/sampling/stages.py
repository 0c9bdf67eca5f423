"""The stages a decision runs, each with a numpy and a torch implementation.

A :class:`~tether.sampling.Pipeline` compiles to the built-in stages (temperature,
penalties, top-k, top-p, min-p); a DSL :class:`~tether.sampling.Program` compiles to
the same objects plus the view commands (sort, slice, threshold, softmax, cumsum,
logits) and an explicit mask. ``on_row`` transforms a numpy :class:`~.rows.Row` (one
row, possibly windowed); ``on_dense`` a torch :class:`~.dense.Dense` (a batch of full
rows, ``-inf`` where removed). Both give the same results.

``windowed`` stages handle a row with an implicit outside (:class:`~.rows.Outside`),
dropping it when they can prove it cannot survive and raising :class:`~.rows.Widen`
when they cannot decide; ``truncates`` stages can drop it.
"""

from __future__ import annotations

import math
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from tether.sampling.rows import Row, Widen

if TYPE_CHECKING:
    from tether.sampling.dense import Dense

_TOP_P_POOL = 64  # top-p first sorts this many of the most likely tokens…
_TOP_P_BINS, _TOP_P_NATS = 64, 100  # …then bins the rest: bins per nat, nats covered

COMPARISONS: dict[str, Callable[[object, object], object]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}


class Stage(ABC):
    """One transformation of the processed logits."""

    windowed: ClassVar[bool] = False
    truncates: ClassVar[bool] = False
    uses_history: ClassVar[bool] = False

    @abstractmethod
    def on_row(self, row: Row) -> Row:
        """Apply to one numpy row."""

    @abstractmethod
    def on_dense(self, dense: Dense) -> None:
        """Apply to a torch batch, in place."""

    def scale(self) -> float:
        """The factor this stage multiplies logits by (temperature), else 1."""
        return 1.0

    def reach(self) -> float:
        """How far below the top (processed nats) a token can be and survive this
        stage, when that is known in advance (min-p); else ``inf``."""
        return math.inf

    def keeps(self) -> int:
        """How many of the best tokens this stage keeps, when that is known in advance
        (top-k; ties aside); else 0."""
        return 0


# -- the built-in stages --------------------------------------------------------------------
@dataclass(frozen=True)
class Temperature(Stage):
    """Divide the logits by ``t`` (> 0)."""

    t: float
    windowed: ClassVar[bool] = True

    def on_row(self, row: Row) -> Row:
        if self.t != 1:
            row.vals /= np.float32(self.t)
            if row.outside is not None:
                row.outside.scale /= self.t
        return row

    def on_dense(self, dense: Dense) -> None:
        if self.t != 1:
            dense.vals = dense.vals / float(np.float32(self.t))

    def scale(self) -> float:
        return 1.0 / self.t


@dataclass(frozen=True)
class Penalties(Stage):
    """Penalise tokens of the history: the repetition penalty divides positive and
    multiplies negative logits; presence and frequency subtract
    ``presence + frequency · count``."""

    repetition: float = 1.0
    presence: float = 0.0
    frequency: float = 0.0
    windowed: ClassVar[bool] = True
    uses_history: ClassVar[bool] = True

    def penalised(self, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The penalised float32 values of history tokens seen ``counts`` times."""
        if self.repetition != 1:
            values = np.where(values > 0, values / self.repetition, values * self.repetition)
        return (values - (self.presence + self.frequency * counts)).astype(np.float32)

    def on_row(self, row: Row) -> Row:
        if row.ctx.history.shape[0]:
            where, counts = row.positions(row.ctx.history, row.ctx.counts)
            row.vals[where] = self.penalised(row.vals[where], counts)
        return row

    def on_dense(self, dense: Dense) -> None:
        dense.penalise(self.penalised)


@dataclass(frozen=True)
class TopK(Stage):
    """Keep the ``k`` largest (ties at the boundary kept)."""

    k: int
    windowed: ClassVar[bool] = True
    truncates: ClassVar[bool] = True

    def keeps(self) -> int:
        return max(self.k, 0)

    def on_row(self, row: Row) -> Row:
        vals = row.vals
        if row.outside is None:
            if 0 < self.k < vals.shape[0]:
                return row.select(vals >= kth_largest(vals, self.k), keeps_top=True)
            return row
        if np.count_nonzero(vals >= np.float32(row.outside.bound())) < self.k:
            raise Widen
        return row.select(vals >= kth_largest(vals, self.k), keeps_top=True).settle()

    def on_dense(self, dense: Dense) -> None:
        if 0 < self.k < dense.vals.shape[-1]:
            kth = dense.vals.topk(self.k, dim=-1).values[:, -1:]
            dense.remove(dense.vals < kth, keeps_top=True)


@dataclass(frozen=True)
class TopP(Stage):
    """Keep the smallest most likely set whose probability reaches ``p`` (ties in)."""

    p: float
    windowed: ClassVar[bool] = True
    truncates: ClassVar[bool] = True

    def on_row(self, row: Row) -> Row:
        if row.outside is None:
            peak = row.vals.max()
            weights = np.exp(row.vals - peak)
            threshold = nucleus_threshold(row.vals - peak, weights, self.p, 0.0)
            return row.select(weights >= threshold, keeps_top=True)
        peak = row.peak()
        weights = np.exp(row.vals - np.float32(peak))
        extra = row.outside_mass(peak)
        threshold = nucleus_threshold(row.vals - np.float32(peak), weights, self.p, extra)
        if threshold is None or threshold < math.exp(row.outside.bound() - peak):
            raise Widen
        return row.select(weights >= threshold, keeps_top=True).settle()

    def on_dense(self, dense: Dense) -> None:
        dense.nucleus(self.p)


@dataclass(frozen=True)
class MinP(Stage):
    """Keep tokens whose probability is at least ``p`` times the top one's
    (logit ≥ max + ln p)."""

    p: float
    windowed: ClassVar[bool] = True
    truncates: ClassVar[bool] = True

    def reach(self) -> float:
        return -math.log(self.p)

    def on_row(self, row: Row) -> Row:
        # row.peak() widens the window when the top may lie outside the row
        threshold = np.float32(row.peak()) + np.float32(math.log(self.p))
        if row.outside is None:
            return row.select(row.vals >= threshold, keeps_top=True)
        if not threshold >= row.outside.bound():
            raise Widen
        return row.select(row.vals >= threshold, keeps_top=True).settle()

    def on_dense(self, dense: Dense) -> None:
        peak = dense.vals.max(dim=-1, keepdim=True).values
        dense.remove(dense.vals < peak + float(np.float32(math.log(self.p))), keeps_top=True)


# -- the DSL's own stages ---------------------------------------------------------------------
@dataclass(frozen=True)
class Mask(Stage):
    """Remove the tokens the constraint's mask disallows (a program's ``mask``)."""

    windowed: ClassVar[bool] = True

    def on_row(self, row: Row) -> Row:
        mask = row.ctx.mask
        if mask is None:
            return row
        if row.outside is not None:
            row.outside.allowed = row.outside.allowed & mask
            row.outside.legal = True
        return row.select(mask[row.token_ids()].view(bool))

    def on_dense(self, dense: Dense) -> None:
        if dense.mask is not None:
            dense.remove(~dense.mask)


@dataclass(frozen=True)
class Sort(Stage):
    """Order the view by the current values, descending (``sort -``) or ascending;
    ties by token id. Only the view changes: every token keeps its identity."""

    descending: bool = True

    def on_row(self, row: Row) -> Row:
        live = row.live()
        keys = row.key_values()[live]
        row.order = live[np.argsort(-keys if self.descending else keys, kind="stable")]
        return row

    def on_dense(self, dense: Dense) -> None:
        dense.sort(self.descending)


@dataclass(frozen=True)
class Slice(Stage):
    """Keep the tokens at view positions ``start:stop:step`` (Python semantics)."""

    start: int | None = None
    stop: int | None = None
    step: int | None = None

    def on_row(self, row: Row) -> Row:
        kept = row.view()[self.start:self.stop:self.step]
        keep = np.zeros(row.vals.shape[0], dtype=bool)
        keep[kept] = True
        sliced = row.select(keep)
        sliced.order = np.searchsorted(np.flatnonzero(keep), kept)
        return sliced

    def on_dense(self, dense: Dense) -> None:
        dense.slice(slice(self.start, self.stop, self.step))


@dataclass(frozen=True)
class Threshold(Stage):
    """Remove every token whose value ``op`` ``value`` (logits, or probabilities /
    cumulative probabilities after ``softmax`` / ``cumsum``)."""

    op: str
    value: float

    def on_row(self, row: Row) -> Row:
        compare = COMPARISONS[self.op]
        if row.key is None:
            remove = compare(row.vals.astype(np.float64), self.value)
        else:
            remove = compare(row.key, self.value * row.den)
        return row.select(~remove)

    def on_dense(self, dense: Dense) -> None:
        dense.threshold(COMPARISONS[self.op], self.value)


@dataclass(frozen=True)
class Softmax(Stage):
    """The values become the probabilities of the tokens still in the running."""

    def on_row(self, row: Row) -> Row:
        weights = np.exp(row.vals - row.vals.max())
        row.den = float(weights.sum(dtype=np.float64))
        row.key = weights.astype(np.float64)
        row.key_kind = "probs"
        return row

    def on_dense(self, dense: Dense) -> None:
        dense.softmax()


@dataclass(frozen=True)
class Cumsum(Stage):
    """The values become running sums along the view: each token's own value
    included, or (``exclusive``) only the tokens before it."""

    exclusive: bool = False

    def on_row(self, row: Row) -> Row:
        view = row.view()
        running = running_sums(row.key_values()[view], exclusive=self.exclusive)
        row.key = np.full(row.vals.shape[0], np.inf)
        row.key[view] = running
        row.key_kind = "cumsum"
        return row

    def on_dense(self, dense: Dense) -> None:
        dense.cumsum(self.exclusive)


@dataclass(frozen=True)
class Logits(Stage):
    """The values become the (processed) logits again."""

    def on_row(self, row: Row) -> Row:
        row.key, row.den, row.key_kind = None, 1.0, "logits"
        return row

    def on_dense(self, dense: Dense) -> None:
        dense.key, dense.den = None, None


# -- shared arithmetic ----------------------------------------------------------------------
def running_sums(values: np.ndarray, *, exclusive: bool) -> np.ndarray:
    """Sequential float64 prefix sums (with or without each value itself)."""
    running = np.cumsum(values, dtype=np.float64)
    if not exclusive:
        return running
    before = np.zeros_like(running)
    before[1:] = running[:-1]
    return before


def kth_largest(vals: np.ndarray, k: int) -> np.float32:
    return np.partition(vals, vals.shape[0] - k)[vals.shape[0] - k]


def nucleus_threshold(shifted: np.ndarray, weights: np.ndarray, p: float,
                      extra: float) -> float | None:
    """The weight of the token at which the running mass of ``weights`` (descending),
    out of their total plus ``extra``, reaches ``p``; the nucleus is every token at
    least that heavy. None if the given weights never reach it (the crossing lies in
    the ``extra`` mass)."""
    target = p * (float(weights.sum(dtype=np.float64)) + extra)
    if weights.shape[0] > _TOP_P_POOL:
        pool = weights[np.argpartition(weights, weights.shape[0] - _TOP_P_POOL)[-_TOP_P_POOL:]]
    else:
        pool = weights
    threshold = _crossing(np.sort(pool)[::-1], 0.0, target)
    if threshold is None:  # a wide nucleus: find its last token through a histogram
        threshold = _wide_nucleus_threshold(shifted, weights, target, strict=extra > 0)
    return threshold


def _crossing(ordered: np.ndarray, before: float, target: float) -> float | None:
    """The first weight of ``ordered`` (descending) at which the running mass, starting
    from ``before``, reaches ``target``; None if it never does."""
    cumulative = before + np.cumsum(ordered, dtype=np.float64)
    cut = int(np.searchsorted(cumulative, target, side="left"))
    return float(ordered[cut]) if cut < ordered.shape[0] else None


def _wide_nucleus_threshold(shifted: np.ndarray, weights: np.ndarray, target: float, *,
                            strict: bool) -> float | None:
    """Bin tokens by logit (``_TOP_P_BINS`` bins per nat below the top), accumulate the
    mass bin by bin, and sort only the bin where it crosses ``target``. Without
    ``strict``, a target missed by rounding takes the lightest token."""
    bins = np.minimum(-shifted * _TOP_P_BINS, _TOP_P_BINS * _TOP_P_NATS).astype(np.int64)
    mass = np.cumsum(np.bincount(bins, weights=weights))
    if strict and mass[-1] < target:
        return None
    crossing = min(int(np.searchsorted(mass, target, side="left")), mass.shape[0] - 1)
    before = float(mass[crossing - 1]) if crossing else 0.0
    members = np.sort(weights[bins == crossing])[::-1]
    threshold = _crossing(members, before, target)
    if threshold is None and strict:
        return None
    return float(members[-1]) if threshold is None else threshold
