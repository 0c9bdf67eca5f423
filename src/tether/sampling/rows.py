"""The row one numpy decision works on: the feasible tokens of one row of logits, as
sorted ids and float32 values, shrinking stage by stage.

On a large vocabulary most tokens cannot survive a truncation stage (top-k, top-p,
min-p) or win an argmax, so the row starts as a *window*: the allowed tokens within a
few nats of the largest allowed logit (no more than the stages need when they say:
min-p's reach, top-k's k), plus every token of the history (penalties may move
those). One vectorised pass over the row (:class:`Context`) finds the maxima and the
largest allowed logit of every block of tokens, so a window reads only the blocks that
reach it. The rest stays implicit as :class:`Outside`, known by one bound on its values
and sums that the kernels of :mod:`tether.sampling._kernels` compute over the whole
vocabulary.
A stage that can prove the outside cannot matter drops it; one that cannot raises
:class:`Widen`, and the decision runs again on a wider window, at worst on the full
row. Results are those of the full row: the window only decides what is materialised.
(A draw that may land outside the window, when nothing truncates, follows the full
row's distribution exactly but maps its uniform number to tokens window first, so a
given seed can pick another token than on the full row.)

Token identity is preserved throughout: sorting (a DSL command) only sets ``order``, a
view over the row's positions, and ``key`` holds derived values (probabilities or
cumulative sums) beside the logits rather than instead of them.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import accumulate

import numpy as np

from tether import bits
from tether.errors import NoLegalContinuation, TetherError
from tether.sampling import _kernels

WINDOW_MIN = 16384  # rows shorter than this are always materialised in full
_DRAW_BLOCK = 512  # block size of the two-level inverse-CDF search
_SMALL = 64  # rows up to this many tokens are drawn from in plain Python
_SPARSE = 16  # masks allowing at most 1/16 of the row are visited token by token
_NEG_INF = np.float32(-np.inf)


class Widen(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The window was too narrow for an exact answer: run again on a wider one."""


@dataclass
class Context:
    """What every stage of one decision may consult: the raw logits (float32, NaN
    included), the mask as 0/1 flags per token (``None``: no mask) and as Bitmask
    words, the history, the largest finite logit overall and among the allowed tokens,
    and the largest allowed logit of every block of ``_kernels.BLOCK`` tokens (as order
    keys, ``tops``: what lets a window read only the blocks that can reach it)."""

    x: np.ndarray
    mask: np.ndarray | None
    words: np.ndarray | None
    tokens: Sequence[int] | np.ndarray  # the history as given
    peak: float  # the largest raw logit (NaN ignored); -inf if none is finite
    legal_peak: float  # the largest raw logit of an allowed token (NaN ignored)
    has_nan: bool
    feasible: int  # how many tokens the mask allows (every token without a mask)
    tops: np.ndarray

    @classmethod
    def of(cls, logits: np.ndarray, words: np.ndarray | None,
           history: Sequence[int] | np.ndarray) -> Context:
        x = np.asarray(logits, dtype=np.float32).reshape(-1)
        if words is None:
            mask, feasible = None, x.shape[0]
        else:
            words = mask_words(words, x.shape[0])
            mask, feasible = bits.flags(words, x.shape[0])
        tops, peak, legal_peak, has_nan = _summary(x, _everything(x.shape[0]) if mask is None
                                                   else mask)
        return cls(x, mask, words, history, peak, legal_peak, has_nan, feasible, tops)

    @property
    def size(self) -> int:
        return self.x.shape[0]

    @cached_property
    def _history(self) -> tuple[np.ndarray, np.ndarray]:
        return history_counts(self.tokens, self.size)

    @property
    def history(self) -> np.ndarray:
        """Distinct token ids of the history within the row, sorted."""
        return self._history[0]

    @property
    def counts(self) -> np.ndarray:
        """How often each of :attr:`history` occurs."""
        return self._history[1]

    def allowed_ids(self) -> np.ndarray:
        """The ids of the allowed tokens, in order (the mask's set bits in the row)."""
        return self._allowed_ids

    @cached_property
    def _allowed_ids(self) -> np.ndarray:
        if self.words is None:
            return np.arange(self.size)
        return bits.set_bits(self.words, self.feasible)

    @property
    def sparse(self) -> bool:
        """Whether the mask allows few enough tokens to visit them one by one rather
        than pass over the whole row."""
        return self.mask is not None and self.feasible * _SPARSE <= self.size

    def window_source(self, masked: bool) -> tuple[np.ndarray, np.ndarray, float]:
        """What a window is cut from: the flags of the tokens it may hold, the tops of
        their blocks and their largest logit (the allowed tokens when ``masked``)."""
        if masked and self.mask is not None:
            return self.mask, self.tops, self.legal_peak
        if self.mask is None:
            return _everything(self.size), self.tops, self.peak
        return _everything(self.size), self._all_tops, self.peak

    def nats_to_kth(self, k: int, masked: bool) -> float:
        """Raw nats from the top of :meth:`window_source` down to the k-th largest of
        its block tops: a window that deep holds at least ``k`` tokens (``inf`` if
        fewer than ``k`` blocks hold a finite one)."""
        _, tops, top = self.window_source(masked)
        if k > tops.shape[0]:
            return math.inf
        kth = _kernels.unkey(np.partition(tops, tops.shape[0] - k)[tops.shape[0] - k])
        return top - kth if kth > -math.inf else math.inf  # too few finite tops

    @cached_property
    def _all_tops(self) -> np.ndarray:
        return _summary(self.x, _everything(self.size))[0]

    def log_z(self) -> float:
        """log of the raw (temperature 1) probability mass on the allowed tokens."""
        if self.mask is None:
            return 0.0
        total, legal = self._log_masses
        return min(legal - total, 0.0)

    def log_total(self) -> float:
        """log Σ exp over every raw logit (the full softmax's normaliser)."""
        return self._log_masses[0]

    def log_legal(self) -> float:
        """log Σ exp over the raw logits of the allowed tokens."""
        return self._log_masses[1]

    @cached_property
    def _log_masses(self) -> tuple[float, float]:
        """log Σ exp of the raw logits over every token and over the allowed ones."""
        allowed = _everything(self.size) if self.mask is None else self.mask
        if self.size >= WINDOW_MIN:
            total, legal = _kernels.masses(self.x, allowed, self.peak)
            if legal > 1e-30:
                return self.peak + math.log(total), self.peak + math.log(legal)
        clean = np.where(np.isnan(self.x), _NEG_INF, self.x)
        return logsumexp(clean), logsumexp(clean[allowed.view(bool)])

    def window_worthwhile(self, masked: bool) -> bool:
        """Whether a window can save work: a long row with a finite top to cut it from
        (however few tokens the mask allows, a window reads only the blocks near it)."""
        return self.size >= WINDOW_MIN and math.isfinite(self.window_source(masked)[2])


@dataclass
class Outside:
    """The tokens left out of the window: allowed (``allowed``, history cleared), with
    a raw logit below ``cut``. Their processed value is ``raw · scale``."""

    allowed: np.ndarray
    cut: float
    scale: float = 1.0
    legal: bool = True  # allowed == the context's allowed tokens, minus the window

    def bound(self) -> float:
        """Every outside token's processed value is below this (with room for the
        float32 rounding of the stages that scaled it)."""
        value = self.cut * self.scale
        return value + 1e-5 * (abs(value) + 1.0)

    def mass(self, ctx: Context, shift: float) -> float:
        """Σ exp(processed − shift) over the outside tokens (one pass over the row, or
        over the allowed tokens when the mask is sparse)."""
        if not (self.legal and ctx.sparse):
            return _kernels.outside_mass(ctx.x, self.allowed, self.cut, self.scale, shift)
        return float(self._weights(ctx, shift)[1].sum(dtype=np.float64))

    def locate(self, ctx: Context, shift: float, target: float) -> int:
        """The first outside token (in id order) at which the running mass passes
        ``target``; the last one if it never does (rounding), -1 if there is none."""
        if not (self.legal and ctx.sparse):
            return _kernels.outside_locate(ctx.x, self.allowed, self.cut, self.scale, shift,
                                           target)
        ids, weights = self._weights(ctx, shift)
        if not ids.shape[0]:
            return -1
        at = int(np.searchsorted(np.cumsum(weights, dtype=np.float64), target, side="right"))
        return int(ids[min(at, ids.shape[0] - 1)])

    def _weights(self, ctx: Context, shift: float) -> tuple[np.ndarray, np.ndarray]:
        """The outside tokens of a sparse mask and their exp(processed − shift)."""
        ids = ctx.allowed_ids()
        raw = ctx.x[ids]
        out = self.allowed[ids].view(bool) & (raw < np.float32(self.cut))  # NaN: never
        weights = np.exp(raw[out] * np.float32(self.scale) - np.float32(shift))
        return ids[out], weights


def mask_words(mask: np.ndarray, size: int) -> np.ndarray:
    """``mask`` as the packed uint32 words of a row of ``size`` logits (tether's
    :class:`~tether.Bitmask` layout: bit ``i % 32`` of word ``i // 32``). A mask shorter
    than the row (a model head padded past the vocabulary) disallows the ids it does not
    cover; a bool array is packed. A mask allowing an id past the row, or of another
    dtype, is a :class:`TetherError` naming ``mask``."""
    mask = np.asarray(mask)
    if mask.dtype == bool:
        mask = np.packbits(mask.reshape(-1), bitorder="little")
        mask = np.concatenate([mask, np.zeros(-mask.size % 4, dtype=np.uint8)]).view(np.uint32)
    elif not np.issubdtype(mask.dtype, np.integer):
        raise TetherError(f"mask: expected uint32 words or bools, not {mask.dtype}")
    given = np.ascontiguousarray(mask, dtype=np.uint32).reshape(-1)
    n_words = (size + 31) // 32
    if given.size == n_words:  # the usual case, per decision: no copy
        words = given
    else:
        words = np.zeros(n_words, dtype=np.uint32)
        words[:min(given.size, n_words)] = given[:n_words]
    kept = min(given.size, n_words)
    past_row = bool(given[kept:].any())
    if size % 32 and kept == n_words:  # the last word's bits past the row
        high = np.uint32((1 << (size % 32)) - 1)
        past_row |= bool(words[-1] & ~high)
    if past_row:
        raise TetherError(f"mask: it allows token ids past the {size} logits (a mask for a "
                          "larger vocabulary?)")
    return words


class Row:
    """The materialised tokens: sorted ids (``None``: every id of the row, in order) and
    their processed float32 values; ``outside`` the implicit rest (``None``: nothing).
    ``order`` is the DSL's view (positions, best first after ``sort -``); ``key`` the
    values the view commands compare, as float64 numerators over ``den`` (``None``:
    the logits themselves)."""

    def __init__(self, ids: np.ndarray | None, vals: np.ndarray, ctx: Context,
                 outside: Outside | None = None) -> None:
        self.ids, self.vals, self.ctx, self.outside = ids, vals, ctx, outside
        self.order: np.ndarray | None = None
        self.key: np.ndarray | None = None
        self.den = 1.0
        self.key_kind = "logits"

    @classmethod
    def build(cls, ctx: Context, *, masked: bool, window: float | None,
              history: bool = False) -> Row:
        """The row of ``ctx`` (under its mask when ``masked``), materialising the
        tokens within ``window`` raw nats of the top (``None``: all of them) and, with
        ``history``, every allowed token of the history."""
        if window is None:
            if masked and ctx.mask is not None:
                ids = ctx.allowed_ids()
                vals = ctx.x[ids]
            else:
                ids, vals = None, ctx.x.copy()
            if ctx.has_nan:
                vals[np.isnan(vals)] = _NEG_INF
            if not np.any(vals > _NEG_INF):
                raise NoLegalContinuation("every allowed token has a -inf or NaN logit")
            return cls(ids, vals, ctx)
        allowed, tops, top = ctx.window_source(masked)
        cut = float(np.float32(top - window))
        near = _kernels.gather(ctx.x, allowed, tops, cut)
        if history and ctx.history.shape[0]:
            kept = ctx.history[allowed[ctx.history].view(bool)]
            allowed = allowed.copy()
            allowed[ctx.history] = 0
            near = np.union1d(near, kept)
        vals = ctx.x[near]
        if ctx.has_nan:
            vals[np.isnan(vals)] = _NEG_INF
        everything = ctx.feasible if masked and ctx.mask is not None else ctx.size
        if near.shape[0] == everything:  # the window holds every allowed token
            return cls(near, vals, ctx)
        return cls(near, vals, ctx, Outside(allowed, cut, legal=masked or ctx.mask is None))

    # -- positions and tokens ------------------------------------------------------------
    def token(self, index: int) -> int:
        """The token id at position ``index``."""
        return index if self.ids is None else int(self.ids[index])

    def token_ids(self) -> np.ndarray:
        """The token id of every position."""
        return np.arange(self.vals.shape[0]) if self.ids is None else self.ids

    def positions(self, ids: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the token ids ``ids`` that are in the row, with their counts."""
        if self.ids is None:
            keep = (ids >= 0) & (ids < self.vals.shape[0])
            return ids[keep], counts[keep]
        if self.ids.shape[0] == 0:
            return self.ids, counts[:0]
        where = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        keep = self.ids[where] == ids
        return where[keep], counts[keep]

    def live(self) -> np.ndarray:
        """Positions (in order) of the tokens still in the running."""
        return np.flatnonzero(self.vals > _NEG_INF)

    def view(self) -> np.ndarray:
        """Positions in view order: the sort order, else by id; removed tokens excluded."""
        return self.live() if self.order is None else self.order

    def key_values(self) -> np.ndarray:
        """The values the view commands compare (float64)."""
        return self.vals.astype(np.float64) if self.key is None else self.key

    # -- shrinking --------------------------------------------------------------------
    def select(self, keep: np.ndarray, *, keeps_top: bool = False) -> Row:
        """The row restricted to the positions where ``keep`` is True (``keeps_top``:
        the caller keeps the largest value, so the row cannot become empty)."""
        where = np.flatnonzero(keep)
        ids = where if self.ids is None else self.ids[where]
        row = Row(ids, self.vals[where], self.ctx, self.outside)
        row.key_kind, row.den = self.key_kind, self.den
        if self.key is not None:
            row.key = self.key[where]
        if self.order is not None:
            remap = np.full(self.vals.shape[0], -1, dtype=np.int64)
            remap[where] = np.arange(where.shape[0])
            order = remap[self.order]
            row.order = order[order >= 0]
        if not keeps_top and row.outside is None and not np.any(row.vals > _NEG_INF):
            raise NoLegalContinuation("the sampling stages removed every token")
        return row

    def settle(self) -> Row:
        """This row with no outside (the caller proved it cannot matter)."""
        self.outside = None
        return self

    def peak(self) -> float:
        """The largest processed value, which must bound the outside too."""
        peak = float(self.vals.max()) if self.vals.shape[0] else -math.inf
        if self.outside is not None and not peak >= self.outside.bound():
            raise Widen
        return peak

    def outside_mass(self, shift: float) -> float:
        """Σ exp(processed − shift) over the outside tokens. Unscaled, they are the
        allowed tokens that are not in the row, whose raw mass the context knows: no
        pass over the vocabulary beyond the one the KL diagnostic makes anyway."""
        outside = self.outside
        if outside is None:
            return 0.0
        if not (outside.legal and outside.scale == 1.0):
            return outside.mass(self.ctx, shift)
        raw = self.ctx.x[self.token_ids()]
        if self.ctx.has_nan:
            raw = np.where(np.isnan(raw), _NEG_INF, raw)
        inside = float(np.exp(raw - np.float32(shift)).sum(dtype=np.float64))
        return max(math.exp(self.ctx.log_legal() - shift) - inside, 0.0)

    def expand(self) -> np.ndarray:
        """The full-length processed logits, ``-inf`` outside the row."""
        if self.outside is not None:
            raise Widen
        if self.ids is None:
            return self.vals
        out = np.full(self.ctx.size, -np.inf, dtype=np.float32)
        out[self.ids] = self.vals
        return out

    # -- the pick -----------------------------------------------------------------------
    def pick(self, rng: np.random.Generator | None, *, greedy: bool) -> tuple[int, float]:
        """The chosen token and its log-prob under the processed distribution: the
        argmax (ties to the lowest id) or a draw."""
        peak = self.peak()
        weights = np.exp(self.vals - np.float32(peak))
        if weights.shape[0] <= _SMALL:  # a few tokens: plain Python beats numpy's overhead
            running: list[float] | None = list(accumulate(weights.tolist()))
            inside = running[-1]
        else:
            running, inside = None, float(weights.sum(dtype=np.float64))
        total = inside + self.outside_mass(peak)
        if greedy:
            index = int(self.vals.argmax())
        else:
            u = (rng or np.random.default_rng()).random() * total
            if u >= inside and self.outside is not None:
                token = self.outside.locate(self.ctx, peak, u - inside)
                value = float(self.ctx.x[token]) * self.outside.scale
                return token, value - peak - math.log(total)
            u = min(u, inside)
            index = _locate(weights, u) if running is None else _position_in(running, u)
        return self.token(index), float(self.vals[index] - peak) - math.log(total)


def logsumexp(x: np.ndarray) -> float:
    """log Σ exp(x) (float64 sum; -inf for an empty or all -inf array)."""
    if x.shape[0] == 0:
        return -math.inf
    peak = float(x.max())
    if peak == -math.inf:
        return peak
    return peak + math.log(float(np.exp(x - np.float32(peak)).sum(dtype=np.float64)))


@lru_cache(maxsize=8)
def _everything(size: int) -> np.ndarray:
    """The flags of a row without a mask (read-only, shared)."""
    flags = np.ones(size, dtype=np.uint8)
    flags.flags.writeable = False
    return flags


def _summary(x: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, float, float, bool]:
    """``(tops, peak, legal peak, has_nan)`` of a row (see :func:`_kernels.scan`)."""
    tops = np.empty(-(-x.shape[0] // _kernels.BLOCK), dtype=np.int32)
    peak, legal, has_nan = _kernels.scan(x, allowed, tops)
    if has_nan:  # rare: the maxima of the row without its NaNs
        return (*_summary(np.where(np.isnan(x), _NEG_INF, x), allowed)[:3], True)
    return tops, peak, legal, has_nan


def history_counts(history: Sequence[int] | np.ndarray,
                   size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct token ids of ``history`` within ``[0, size)`` (sorted) and how often
    each occurs."""
    if len(history) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    ids, counts = np.unique(np.asarray(history, dtype=np.int64), return_counts=True)
    keep = (ids >= 0) & (ids < size)
    return ids[keep], counts[keep]


def _locate(weights: np.ndarray, u: float) -> int:
    """Inverse CDF: the position where the running sum of ``weights`` passes ``u``
    (zero weights never win). Two short cumulative sums: blocks, then inside one."""
    if weights.shape[0] <= _DRAW_BLOCK:
        return _position(np.cumsum(weights, dtype=np.float64), u)
    starts = np.arange(0, weights.shape[0], _DRAW_BLOCK)
    block_ends = np.cumsum(np.add.reduceat(weights, starts), dtype=np.float64)
    block = min(int(np.searchsorted(block_ends, u, side="right")), len(starts) - 1)
    while block > 0 and block_ends[block] == block_ends[block - 1]:
        block -= 1  # u rounded past the last live block
    base = block_ends[block - 1] if block else 0.0
    inside = np.cumsum(weights[starts[block]:starts[block] + _DRAW_BLOCK], dtype=np.float64)
    return int(starts[block]) + _position(inside, u - base)


def _position_in(running: list[float], u: float) -> int:
    """:func:`_position` on a Python list."""
    pos = bisect_right(running, u)
    if pos >= len(running):
        pos = bisect_left(running, running[-1])
    return pos


def _position(running: np.ndarray, u: float) -> int:
    """Where the running sum passes ``u``; past the end (rounding), the last live one."""
    pos = int(np.searchsorted(running, u, side="right"))
    if pos >= running.shape[0]:
        pos = int(np.flatnonzero(running < running[-1]).shape[0])
    return pos
