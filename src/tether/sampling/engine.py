"""Running a compiled list of stages on logits: numpy or torch, one row or a batch.

:class:`~tether.sampling.Pipeline` and :class:`~tether.sampling.Program` both compile
to :class:`Stages` and delegate here. numpy rows go through :mod:`.rows` (a window
near the top first on a large vocabulary, wider if a stage cannot decide, never a
different result); torch tensors through :mod:`.dense`, on their own device, with
torch imported only then. A 2-D input is a batch: masks of shape ``(words,)`` apply to
every row, ``(batch, words)`` one per row; ``history`` is one sequence for every row
or one sequence per row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from tether import bits
from tether.errors import NoLegalContinuation, TetherError
from tether.sampling.dense import Dense
from tether.sampling.rows import Context, Row, Widen
from tether.sampling.stages import Stage

T = TypeVar("T")
WINDOWS = (8.0, 20.0)  # processed nats below the top materialised first; then everything
REACH_MARGIN = 0.5  # processed nats added to a known reach (see Stage.reach)


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
class Stages:
    """Stages in order; the mask comes before them unless ``mask_first`` is False (a
    program that places ``mask`` itself)."""

    stages: tuple[Stage, ...]
    mask_first: bool = True
    _windowed: bool = field(init=False, repr=False, compare=False)
    _truncates: bool = field(init=False, repr=False, compare=False)
    _history: bool = field(init=False, repr=False, compare=False)
    _spread: float = field(init=False, repr=False, compare=False)
    _reach: float = field(init=False, repr=False, compare=False)
    _keeps: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        facts = {"_windowed": all(s.windowed for s in self.stages),
                 "_truncates": any(s.truncates for s in self.stages),
                 "_history": any(s.uses_history for s in self.stages),
                 "_spread": math.prod(1.0 / s.scale() for s in self.stages),
                 "_reach": min((s.reach() for s in self.stages), default=math.inf),
                 "_keeps": min((s.keeps() for s in self.stages if s.keeps()), default=0)}
        for name, value in facts.items():
            object.__setattr__(self, name, value)

    def apply(self, logits: Any, mask: Any = None, history: Any = ()) -> Any:
        """Processed logits, ``-inf`` where removed: same type, shape and device."""
        if _is_torch(logits):
            dense = self._dense(logits, mask, history)
            return dense.vals[0] if logits.ndim == 1 else dense.vals
        x = _numpy_logits(logits)
        if x.ndim == 1:
            return self._apply_row(x, mask, history)
        masks, histories = _per_row(mask, history, x.shape[0])
        return np.stack([self._apply_row(row, m, h)
                         for row, m, h in zip(x, masks, histories, strict=True)])

    def decide(self, logits: Any, mask: Any, history: Any, rng: np.random.Generator | None,
               *, greedy: bool) -> Step | list[Step]:
        """The argmax (``greedy``) or a draw: one :class:`Step`, a list for a batch."""
        if _is_torch(logits):
            dense = self._dense(logits, mask, history)
            feasible, log_z = dense.feasible, dense.log_z()
            picks = dense.pick(rng, greedy=greedy)
            steps = [Step(t, lp, lz, f) for (t, lp), lz, f in
                     zip(picks, log_z, feasible, strict=True)]
            return steps[0] if logits.ndim == 1 else steps
        x = _numpy_logits(logits)
        if x.ndim == 1:
            return self._decide_row(x, mask, history, rng, greedy)
        masks, histories = _per_row(mask, history, x.shape[0])
        return [self._decide_row(row, m, h, rng, greedy)
                for row, m, h in zip(x, masks, histories, strict=True)]

    # -- numpy ------------------------------------------------------------------------------
    def solve(self, ctx: Context, finish: Callable[[Row], T], *, truncating: bool,
              reach: float = math.inf) -> T:
        """``finish`` applied to the processed row of ``ctx``: on a window first when
        that can save work, wider whenever a stage or ``finish`` raises :class:`Widen`.
        ``truncating``: ``finish`` needs a row without outside (no window is tried
        unless a stage truncates); ``reach``: the processed nats below the top that
        ``finish`` looks at (0 for an argmax), which can make the first window narrower."""
        for window in self._windows(ctx, truncating=truncating, reach=reach):
            try:
                return finish(self._run(ctx, window))
            except Widen:
                continue
        return finish(self._run(ctx, None))

    def _apply_row(self, x: np.ndarray, mask: Any, history: Any) -> np.ndarray:
        return self.solve(context(x, mask, history), Row.expand, truncating=True)

    def _decide_row(self, x: np.ndarray, mask: Any, history: Any,
                    rng: np.random.Generator | None, greedy: bool) -> Step:
        ctx = context(x, mask, history)
        log_z = ctx.log_z()  # first: its pass over the logits finds them still in cache
        token, logprob = self.solve(ctx, lambda row: row.pick(rng, greedy=greedy),
                                    truncating=False, reach=0.0 if greedy else math.inf)
        return Step(token=token, logprob=logprob, log_z=log_z, feasible=ctx.feasible)

    def _windows(self, ctx: Context, *, truncating: bool, reach: float) -> list[float]:
        """The windows (raw nats below the top) to try before the full row. The first
        is cut to what the stages need when they say: down to the k-th best block top
        when a stage keeps the best k (the window then holds at least k tokens), else
        no wider than what the stages or the pick can keep (their reach), and never
        wider than ``WINDOWS[0]`` processed nats without such a reason."""
        if not (WINDOWS and self._windowed and ctx.window_worthwhile(self.mask_first)):
            return []
        if truncating and not self._truncates:
            return []
        first = min(WINDOWS[0], min(reach, self._reach) + REACH_MARGIN) * self._spread
        deep = ctx.nats_to_kth(self._keeps, self.mask_first) if self._keeps else math.inf
        if math.isfinite(deep):
            first = deep + REACH_MARGIN * self._spread
        return [first, *(w for w in (n * self._spread for n in WINDOWS[1:]) if w > first)]

    def _run(self, ctx: Context, window: float | None) -> Row:
        row = Row.build(ctx, masked=self.mask_first, window=window, history=self._history)
        for stage in self.stages:
            row = stage.on_row(row)
        return row

    # -- torch ------------------------------------------------------------------------------
    def _dense(self, logits: Any, mask: Any, history: Any) -> Dense:
        import torch

        if logits.ndim not in (1, 2):
            raise TetherError(f"logits must be 1-D or 2-D, not {logits.ndim}-D")
        batch = logits.reshape(-1, logits.shape[-1])
        _, histories = _per_row(None, history if logits.ndim == 2 else [history],
                                batch.shape[0])
        allowed = _torch_mask(torch, mask, batch.shape[0], batch.shape[-1], batch.device)
        dense = Dense(torch, batch, allowed, histories)  # raises if a row allows nothing
        if self.mask_first and allowed is not None:
            dense.remove(~allowed, keeps_top=True)
        for stage in self.stages:
            stage.on_dense(dense)
        return dense


def context(x: Any, mask: Any, history: Any = ()) -> Context:
    """The :class:`Context` of one numpy row; raises if the mask leaves nothing."""
    ctx = Context.of(x, None if mask is None else np.asarray(mask), _numpy_history(history))
    if ctx.feasible == 0:
        raise NoLegalContinuation("no token is allowed at this step (empty mask)")
    if ctx.peak == -math.inf:
        raise NoLegalContinuation("every logit is -inf or NaN")
    return ctx


def _is_torch(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


def _numpy_logits(logits: Any) -> np.ndarray:
    x = np.asarray(logits)
    if x.ndim not in (1, 2):
        raise TetherError(f"logits must be 1-D or 2-D, not {x.ndim}-D")
    return x


def _numpy_history(history: Any) -> Any:
    if _is_torch(history):
        return history.detach().cpu().numpy()
    return history


def _per_row(mask: Any, history: Any, batch: int) -> tuple[list[Any], list[Any]]:
    """One mask and one history per row of a batch."""
    if mask is None or _is_torch(mask) or np.ndim(mask) == 1:
        masks = [mask] * batch
    else:
        masks = list(np.asarray(mask))
    history = _numpy_history(history)
    if len(history) == 0 or np.ndim(history[0]) == 0:
        histories = [history] * batch
    else:
        histories = [_numpy_history(h) for h in history]
    if len(masks) != batch or len(histories) != batch:
        raise TetherError(f"a batch of {batch} rows needs one mask and one history per row "
                          f"(got {len(masks)} masks and {len(histories)} histories)")
    return masks, histories


def _torch_mask(torch: Any, mask: Any, batch: int, size: int, device: Any) -> Any:
    """Bitmask words (numpy or torch, ``(words,)`` or ``(batch, words)``) as a
    ``(batch, size)`` bool tensor on ``device``; ids past the mask are disallowed."""
    if mask is None:
        return None
    if not _is_torch(mask):
        words = np.asarray(mask, dtype=np.uint32).reshape(-1, np.shape(mask)[-1])
        flags = np.stack([bits.flags(w, size)[0] for w in words]).view(bool)
        allowed = torch.from_numpy(flags).to(device)
    else:
        words = mask.to(device=device, dtype=torch.int64).reshape(-1, mask.shape[-1])
        shifts = torch.arange(32, device=device, dtype=torch.int64)
        lanes = ((words & 0xFFFFFFFF).unsqueeze(-1) >> shifts) & 1
        allowed = lanes.reshape(words.shape[0], -1).to(torch.bool)
        if allowed.shape[-1] < size:
            allowed = torch.nn.functional.pad(allowed, (0, size - allowed.shape[-1]))
        allowed = allowed[:, :size]
    if allowed.shape[0] not in (1, batch):
        raise TetherError(f"{allowed.shape[0]} masks for a batch of {batch} rows")
    return allowed.expand(batch, size)
