"""The sampling pipeline (SPEC §9): one token decision from one row of logits.

Stages run in a fixed order, mask outermost::

    mask → temperature → repetition/presence/frequency penalties → top-k → top-p → min-p → pick

The mask first shrinks the row to its feasible tokens (ids plus float32 logits), and each
truncation stage shrinks it again, so later stages and the draw only touch what is left:
a tight constraint or a top-k makes sampling cheap. Everything is O(V) numpy; nothing
sorts the vocabulary (top-k partitions, top-p sorts a small pool or one histogram bin,
the draw searches block sums). :meth:`Pipeline.apply` shows removed tokens as ``-inf``.
An empty feasible set raises :class:`~tether.errors.NoLegalContinuation`, never NaN.

Each decision is reported as a :class:`Step`, which carries the constraint diagnostic of
SPEC §9: ``log_z``, the log of the probability mass the model (raw logits, temperature 1)
puts on the allowed tokens, so that ``KL(p_constrained ‖ p) = -log_z`` for that step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tether.engine import bitmask
from tether.errors import NoLegalContinuation, TetherError

_TOP_P_POOL = 64  # top-p first sorts this many of the most likely tokens…
_TOP_P_BINS, _TOP_P_NATS = 64, 100  # …then bins the rest: bins per nat, nats covered
_DRAW_BLOCK = 512  # block size of the two-level inverse-CDF search


@dataclass(frozen=True)
class Step:
    """One decision: the token, its log-prob under the processed distribution, and the
    constraint diagnostics of that step (``feasible`` counts the tokens the mask left)."""

    token: int
    logprob: float
    log_z: float
    feasible: int

    @property
    def kl(self) -> float:
        """``KL(p_constrained ‖ p) = -log Z`` for this step (0 when nothing was masked)."""
        return -self.log_z


@dataclass(frozen=True)
class Pipeline:
    """Sampling settings; ``temperature=0`` means greedy (argmax, ties to the lowest id).

    ``top_k=0``, ``top_p=1``, ``min_p=0`` and the neutral penalties (1, 0, 0) turn those
    stages off. ``min_p`` keeps tokens whose probability is at least ``min_p`` times the
    top one's (logit ≥ max + ln min_p). The repetition penalty divides positive and
    multiplies negative logits of tokens in the history; presence and frequency penalties
    subtract ``presence + frequency · count``. Ties at the top-k and top-p boundaries are
    kept. With ``temperature=0`` the logits are left unscaled and the reported log-prob
    is the chosen token's under that (temperature 1) distribution.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    def __post_init__(self) -> None:
        checks = [
            (self.temperature >= 0, "temperature must be ≥ 0"),
            (self.top_k >= 0, "top_k must be ≥ 0"),
            (0 < self.top_p <= 1, "top_p must be in (0, 1]"),
            (0 <= self.min_p <= 1, "min_p must be in [0, 1]"),
            (self.repetition_penalty > 0, "repetition_penalty must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise TetherError(f"invalid sampling settings: {message}")

    # -- public API ---------------------------------------------------------------------
    def apply(self, logits: np.ndarray, mask: np.ndarray | None = None,
              history: Sequence[int] = ()) -> np.ndarray:
        """The processed logits (float32, full length, ``-inf`` where a stage removed
        the token)."""
        return self._process(_Row.of(logits, mask), history).expand()

    def sample(self, logits: np.ndarray, mask: np.ndarray | None = None,
               history: Sequence[int] = (), rng: np.random.Generator | None = None) -> Step:
        """Draw a token from the processed distribution (argmax when ``temperature=0``)."""
        return self._decide(logits, mask, history, rng, greedy=self.temperature == 0)

    def argmax(self, logits: np.ndarray, mask: np.ndarray | None = None,
               history: Sequence[int] = ()) -> Step:
        """The most likely token after processing (ties to the lowest id)."""
        return self._decide(logits, mask, history, None, greedy=True)

    # -- stages ---------------------------------------------------------------------------
    def _decide(self, logits: np.ndarray, mask: np.ndarray | None, history: Sequence[int],
                rng: np.random.Generator | None, *, greedy: bool) -> Step:
        row = _Row.of(logits, mask)
        feasible = row.live()
        log_z = row.log_z(logits) if mask is not None else 0.0
        row = self._process(row, history)
        peak = row.vals.max()
        weights = np.exp(row.vals - peak)
        total = float(weights.sum(dtype=np.float64))
        if greedy:
            index = int(np.argmax(row.vals))
        else:
            index = _draw(weights, total, rng or np.random.default_rng())
        logprob = float(row.vals[index] - peak) - math.log(total)
        return Step(token=row.token(index), logprob=logprob, log_z=log_z, feasible=feasible)

    def _process(self, row: _Row, history: Sequence[int]) -> _Row:
        """Temperature and penalties in place, then each truncation stage shrinks the row
        to the tokens it keeps (later stages and the draw only see those)."""
        if self.temperature not in (0, 1):
            row.vals /= np.float32(self.temperature)
        self._penalise(row, history)
        if 0 < self.top_k < row.vals.shape[0]:
            row = row.select(row.vals >= _kth_largest(row.vals, self.top_k))
        if self.top_p < 1:
            row = row.select(_nucleus(row.vals, self.top_p))
        if self.min_p > 0:
            row = row.select(row.vals >= row.vals.max() + np.float32(math.log(self.min_p)))
        return row

    def _penalise(self, row: _Row, history: Sequence[int]) -> None:
        neutral = (self.repetition_penalty == 1 and self.presence_penalty == 0
                   and self.frequency_penalty == 0)
        if neutral or len(history) == 0:
            return
        ids, counts = np.unique(np.asarray(history, dtype=np.int64), return_counts=True)
        where, counts = row.positions(ids, counts)
        values = row.vals[where]
        if self.repetition_penalty != 1:
            values = np.where(values > 0, values / self.repetition_penalty,
                              values * self.repetition_penalty)
        values = values - (self.presence_penalty + self.frequency_penalty * counts)
        row.vals[where] = values.astype(np.float32)


class _Row:
    """The feasible part of one row of logits: sorted token ids (``None``: every id) and
    a float32 copy of their logits."""

    def __init__(self, ids: np.ndarray | None, vals: np.ndarray, size: int) -> None:
        self.ids, self.vals, self.size = ids, vals, size

    @classmethod
    def of(cls, logits: np.ndarray, mask: np.ndarray | None) -> _Row:
        """Apply the mask (ids past the mask's vocabulary are disallowed; NaN is -inf)."""
        full = np.asarray(logits, dtype=np.float32).reshape(-1)
        if mask is None:
            ids, vals = None, full.copy()
        else:
            words = np.asarray(mask, dtype=np.uint32).reshape(-1)
            allowed = bitmask.to_bool(words, min(full.shape[0], words.shape[0] * 32))
            ids = np.flatnonzero(allowed)
            vals = full[ids]
        vals[np.isnan(vals)] = -np.inf
        row = cls(ids, vals, full.shape[0])
        if row.live() == 0:
            raise NoLegalContinuation("no token is allowed at this step (empty mask)")
        return row

    def select(self, keep: np.ndarray) -> _Row:
        """The row restricted to the positions where ``keep`` is True."""
        where = np.flatnonzero(keep)
        ids = where if self.ids is None else self.ids[where]
        return _Row(ids, self.vals[where], self.size)

    def live(self) -> int:
        """Number of tokens still in the running."""
        return int(np.count_nonzero(self.vals > -np.inf))

    def token(self, index: int) -> int:
        """The token id at position ``index`` of the compact row."""
        return index if self.ids is None else int(self.ids[index])

    def positions(self, ids: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions in the compact row of the token ids ``ids`` that are in it."""
        if self.ids is None:
            keep = (ids >= 0) & (ids < self.size)
            return ids[keep], counts[keep]
        where = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        keep = self.ids[where] == ids
        return where[keep], counts[keep]

    def log_z(self, logits: np.ndarray) -> float:
        """log of the raw (temperature 1) probability mass on the feasible tokens."""
        full = np.asarray(logits, dtype=np.float32).reshape(-1)
        total = _logsumexp(full)
        if math.isnan(total):  # NaN logits count as -inf
            total = _logsumexp(np.where(np.isnan(full), np.float32(-np.inf), full))
        return min(_logsumexp(self.vals) - total, 0.0)

    def expand(self) -> np.ndarray:
        """The full-length logits, ``-inf`` outside the row."""
        if self.ids is None:
            return self.vals
        out = np.full(self.size, -np.inf, dtype=np.float32)
        out[self.ids] = self.vals
        return out


def _logsumexp(x: np.ndarray) -> float:
    peak = float(x.max())
    if peak == -math.inf:
        return peak
    return peak + math.log(float(np.exp(x - peak).sum(dtype=np.float64)))


def _draw(weights: np.ndarray, total: float, rng: np.random.Generator) -> int:
    """Inverse-CDF draw: find the block, then the position inside it (zero weights never
    win). Two short cumulative sums instead of one over the whole row."""
    u = rng.random() * total
    starts = np.arange(0, weights.shape[0], _DRAW_BLOCK)
    block_ends = np.cumsum(np.add.reduceat(weights, starts), dtype=np.float64)
    block = min(int(np.searchsorted(block_ends, u, side="right")), len(starts) - 1)
    while block > 0 and block_ends[block] == block_ends[block - 1]:
        block -= 1  # u rounded past the last live block
    base = block_ends[block - 1] if block else 0.0
    inside = np.cumsum(weights[starts[block]:starts[block] + _DRAW_BLOCK], dtype=np.float64)
    pos = int(np.searchsorted(inside, u - base, side="right"))
    if pos >= inside.shape[0]:  # rounding: take the last live token of the block
        pos = int(np.flatnonzero(inside < inside[-1]).shape[0])
    return int(starts[block]) + pos


def _kth_largest(vals: np.ndarray, k: int) -> np.float32:
    return np.partition(vals, vals.shape[0] - k)[vals.shape[0] - k]


def _nucleus(vals: np.ndarray, p: float) -> np.ndarray:
    """Which tokens form the smallest most-likely set whose mass reaches ``p`` (ties in)."""
    peak = vals.max()
    weights = np.exp(vals - peak)
    target = p * float(weights.sum(dtype=np.float64))
    if weights.shape[0] > _TOP_P_POOL:
        pool = weights[np.argpartition(weights, weights.shape[0] - _TOP_P_POOL)[-_TOP_P_POOL:]]
    else:
        pool = weights
    threshold = _crossing(np.sort(pool)[::-1], 0.0, target)
    if threshold is None:  # a wide nucleus: find its last token through a histogram
        threshold = _wide_nucleus_threshold(vals - peak, weights, target)
    return weights >= threshold


def _crossing(ordered: np.ndarray, before: float, target: float) -> float | None:
    """The first weight of ``ordered`` (descending) at which the running mass, starting
    from ``before``, reaches ``target``; None if it never does."""
    cumulative = before + np.cumsum(ordered, dtype=np.float64)
    cut = int(np.searchsorted(cumulative, target, side="left"))
    return float(ordered[cut]) if cut < ordered.shape[0] else None


def _wide_nucleus_threshold(shifted: np.ndarray, weights: np.ndarray, target: float) -> float:
    """Bin tokens by logit (``_TOP_P_BINS`` bins per nat below the top), accumulate the
    mass bin by bin, and sort only the bin where it crosses ``target``."""
    bins = np.minimum(-shifted * _TOP_P_BINS, _TOP_P_BINS * _TOP_P_NATS).astype(np.int64)
    mass = np.cumsum(np.bincount(bins, weights=weights))
    crossing = min(int(np.searchsorted(mass, target, side="left")), mass.shape[0] - 1)
    before = float(mass[crossing - 1]) if crossing else 0.0
    members = np.sort(weights[bins == crossing])[::-1]
    threshold = _crossing(members, before, target)
    return float(members[-1]) if threshold is None else threshold
