"""`FusionResult`: the outcome of one step of fusion — the feasible tokens, the soft
adjustment of each, what was consulted and what was relaxed.

An unconstrained step (intensity ``NONE``, or free-text reasoning) says so with
``unconstrained=True`` and has no feasible mask: an empty set never stands for "all".
"""

from __future__ import annotations

import numpy as np

from tether.errors import TetherError, TokenIdError
from tether.fusion.domains import Domain, Phase


class FusionResult:
    """One step's decision.

    ``feasible`` is the Bitmask of tokens every non-dropped active hard domain allows
    (``None`` when ``unconstrained``); ``logit_adjustments[i]`` is the soft adjustment of
    ``feasible_ids()[i]``. ``active_domains`` are the domains consulted; ``dropped``
    the hard domains the relaxation cascade dropped this step (``required_relaxation``
    is true iff there are any).
    """

    __slots__ = ("feasible", "logit_adjustments", "active_domains", "phase", "unconstrained",
                 "dropped", "_ids", "_masks")

    def __init__(self, feasible: np.ndarray | None, logit_adjustments: np.ndarray,
                 active_domains: frozenset[Domain], phase: Phase, *,
                 unconstrained: bool = False, dropped: list[Domain] | None = None,
                 ids: np.ndarray | None = None,
                 masks: dict[Domain, np.ndarray] | None = None) -> None:
        self.feasible = feasible
        self.logit_adjustments = logit_adjustments
        self.active_domains = active_domains
        self.phase = phase
        self.unconstrained = unconstrained
        self.dropped = dropped or []
        self._ids = ids
        self._masks = masks or {}

    @property
    def required_relaxation(self) -> bool:
        """Whether the intersection of the active hard domains was empty."""
        return bool(self.dropped)

    def feasible_ids(self) -> np.ndarray:
        """The sorted ids of the feasible tokens (int64)."""
        if self.unconstrained:
            raise TetherError("this step is unconstrained: every token is feasible "
                              "(check FusionResult.unconstrained)")
        return self._ids

    def rejected_by(self, token_id: int) -> list[Domain]:
        """The consulted hard domains (dropped ones included) whose mask rejects
        ``token_id``, in the order Syntax, Types, Imports."""
        token_id = int(token_id)
        if self.unconstrained:
            return []
        n_tokens = self.feasible.shape[0] * 32
        if not 0 <= token_id < n_tokens:
            raise TokenIdError(f"token id {token_id} is outside the masks ({n_tokens} bits)")
        word, bit = token_id >> 5, token_id & 31
        return [d for d, words in self._masks.items() if not (int(words[word]) >> bit) & 1]

    def apply(self, logits: np.ndarray) -> np.ndarray:
        """``logits + adjustment`` on the feasible tokens, ``-inf`` elsewhere (a new
        array; entries past the masks, e.g. a padded output layer, are ``-inf``)."""
        logits = np.asarray(logits)
        out_dtype = logits.dtype if np.issubdtype(logits.dtype, np.floating) else np.float32
        if self.unconstrained:
            return logits.astype(out_dtype, copy=True)
        ids = self._ids
        if ids.size and ids[-1] >= logits.shape[-1]:
            raise TetherError(f"{logits.shape[-1]} logits, but token {int(ids[-1])} is feasible")
        out = np.full(logits.shape[-1], -np.inf, dtype=out_dtype)
        out[ids] = logits[ids] + self.logit_adjustments
        return out
