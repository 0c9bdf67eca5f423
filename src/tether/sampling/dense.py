"""The torch backend: a batch of rows as full-width tensors (SPEC §9).

:class:`Dense` holds the processed logits of every row of a batch, ``-inf`` where a
stage removed the token, on the logits' device; the stages of
:mod:`tether.sampling.stages` transform it in place with batched tensor operations
(per-row loops only where rows differ in shape: history penalties and the view
commands). torch is imported by the caller, only when torch tensors come in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tether.errors import NoLegalContinuation
from tether.sampling.rows import history_counts


class Dense:
    """Processed logits ``vals`` (batch, vocab) float32; ``raw`` the input logits (NaN as
    -inf); ``mask`` the allowed tokens (bool, or ``None``); ``feasible`` how many each
    row allows (a row with nothing allowed raises at once); ``order`` the view of each
    row (token ids, best first after ``sort -``; ``None``: by id); ``key`` and ``den``
    the derived values of the view commands (``None``: the logits)."""

    def __init__(self, torch: Any, logits: Any, mask: Any, histories: Sequence[Any]) -> None:
        self.torch = torch
        raw = logits.to(torch.float32)
        self.raw = raw.masked_fill(torch.isnan(raw), -math.inf)
        self.vals = self.raw.clone()
        self.mask = mask
        self.histories = [history_counts(h, raw.shape[-1]) for h in histories]
        self.order: list[Any] | None = None
        self.key: Any = None
        self.den: Any = None
        self.feasible = self._feasible()

    # -- the mask and diagnostics ------------------------------------------------------
    def _feasible(self) -> list[int]:
        """Per row: how many tokens the mask allows; raises if a row has none, or none
        with a finite logit."""
        batch, size = self.raw.shape
        counts = [size] * batch if self.mask is None else self.mask.sum(dim=-1).tolist()
        if min(counts) == 0:
            raise NoLegalContinuation("no token is allowed at this step (empty mask)")
        live = self.raw > -math.inf
        if self.mask is not None:
            live = live & self.mask
        if not bool(live.any(dim=-1).all()):
            raise NoLegalContinuation("every allowed token has a -inf or NaN logit")
        return counts

    def log_z(self) -> list[float]:
        """Per row: log of the raw probability mass on the allowed tokens."""
        if self.mask is None:
            return [0.0] * self.raw.shape[0]
        legal = self.raw.masked_fill(~self.mask, -math.inf).logsumexp(dim=-1)
        return (legal - self.raw.logsumexp(dim=-1)).clamp(max=0.0).tolist()

    # -- what stages do ----------------------------------------------------------------------
    def remove(self, where: Any, *, keeps_top: bool = False) -> None:
        """Remove the tokens where ``where`` is True (``keeps_top``: never the largest
        value of a row, so no row can become empty)."""
        self.vals = self.vals.masked_fill(where, -math.inf)
        if self.order is not None:
            self.order = [o[self.vals[r, o] > -math.inf] for r, o in enumerate(self.order)]
        if not keeps_top and not bool((self.vals > -math.inf).any(dim=-1).all()):
            raise NoLegalContinuation("the sampling stages removed every token")

    def penalise(self, penalised: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
        for r, (ids, counts) in enumerate(self.histories):
            if ids.shape[0]:
                index = self.torch.from_numpy(ids).to(self.vals.device)
                values = self.vals[r, index].cpu().numpy()
                self.vals[r, index] = self.torch.from_numpy(
                    penalised(values, counts)).to(self.vals.device)

    def nucleus(self, p: float) -> None:
        weights = self.torch.exp(self.vals - self.vals.max(dim=-1, keepdim=True).values)
        target = p * weights.sum(dim=-1, keepdim=True, dtype=self.torch.float64)
        ordered = weights.sort(dim=-1, descending=True).values
        running = ordered.to(self.torch.float64).cumsum(dim=-1)
        cut = self.torch.searchsorted(running, target).clamp(max=weights.shape[-1] - 1)
        self.remove(weights < ordered.gather(-1, cut), keeps_top=True)

    def keys(self) -> Any:
        return self.vals.to(self.torch.float64) if self.key is None else self.key

    def views(self) -> list[Any]:
        if self.order is not None:
            return self.order
        return [self.torch.nonzero(row > -math.inf).flatten() for row in self.vals]

    def sort(self, descending: bool) -> None:
        dead = self.vals == -math.inf
        keys = self.keys().masked_fill(dead, -math.inf if descending else math.inf)
        order = keys.sort(dim=-1, descending=descending, stable=True).indices
        live = (~dead).sum(dim=-1).tolist()
        self.order = [order[r, :n] for r, n in enumerate(live)]

    def slice(self, span: slice) -> None:
        order = []
        for r, view in enumerate(self.views()):
            picks = self.torch.tensor(list(range(view.shape[0])[span]), dtype=self.torch.long,
                                      device=view.device)
            kept = view[picks]
            keep = self.torch.zeros(self.vals.shape[-1], dtype=self.torch.bool,
                                    device=view.device)
            keep[kept] = True
            self.vals[r] = self.vals[r].masked_fill(~keep, -math.inf)
            order.append(kept)
        self.order = order
        if not bool((self.vals > -math.inf).any(dim=-1).all()):
            raise NoLegalContinuation("the sampling stages removed every token")

    def threshold(self, compare: Callable[[Any, Any], Any], value: float) -> None:
        if self.key is None:
            self.remove(compare(self.vals.to(self.torch.float64), value))
        else:
            self.remove(compare(self.key, value * self.den))

    def softmax(self) -> None:
        weights = self.torch.exp(self.vals - self.vals.max(dim=-1, keepdim=True).values)
        self.den = weights.sum(dim=-1, keepdim=True, dtype=self.torch.float64)
        self.key = weights.to(self.torch.float64)

    def cumsum(self, exclusive: bool) -> None:
        keys = self.keys()
        key = self.torch.full_like(keys, math.inf)
        for r, view in enumerate(self.views()):
            running = keys[r, view].cumsum(dim=0)
            if exclusive:
                running = self.torch.cat([running.new_zeros(1), running[:-1]])
            key[r, view] = running
        self.key = key

    # -- the pick ---------------------------------------------------------------------------
    def pick(self, rng: np.random.Generator | None, *, greedy: bool) -> list[tuple[int, float]]:
        """Per row: the chosen token and its log-prob under the processed distribution."""
        torch = self.torch
        peak = self.vals.max(dim=-1, keepdim=True).values
        weights = torch.exp(self.vals - peak)
        total = weights.sum(dim=-1, keepdim=True, dtype=torch.float64)
        if greedy:
            index = self.vals.argmax(dim=-1, keepdim=True)
        else:
            draws = (rng or np.random.default_rng()).random(self.vals.shape[0])
            u = torch.from_numpy(draws).to(total.device).unsqueeze(-1) * total
            running = weights.to(torch.float64).cumsum(dim=-1)
            index = torch.searchsorted(running, u, right=True)
            positive = weights > 0
            last = weights.shape[-1] - 1 - positive.flip(-1).to(torch.int8).argmax(
                dim=-1, keepdim=True)
            index = torch.minimum(index, last)
        chosen = (self.vals.gather(-1, index) - peak).to(torch.float64) - total.log()
        return list(zip(index.flatten().tolist(), chosen.flatten().tolist(), strict=True))
