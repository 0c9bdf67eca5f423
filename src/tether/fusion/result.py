"""`FusionResult`: the outcome of one step of fusion — the feasible tokens, the soft
adjustment of each, what was consulted and what was relaxed.

A step only intersects the hard masks; everything derived from the feasible set is
computed when first asked for, then kept: the sorted ids (:meth:`feasible_ids`), the
adjustments parallel to them (:attr:`logit_adjustments`), and, when many tokens are
feasible, the dense float32 adjustment by token id that :meth:`apply` adds to a row of
logits in one pass (with few, :meth:`apply` works on the ids).

An unconstrained step (intensity ``NONE``, or free-text reasoning) says so with
``unconstrained=True`` and has no feasible mask: an empty set never stands for "all".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tether import bits
from tether.errors import TetherError, TokenIdError
from tether.fusion import kernels
from tether.fusion.domains import Domain, Phase
from tether.fusion.soft import SoftScore

_SPARSE = 16  # apply works on the ids while at most 1/16 of the tokens are feasible
_NO_ADJUSTMENTS = np.zeros(0, dtype=np.float32)
_NO_ADJUSTMENTS.flags.writeable = False


class FusionResult:
    """One step's decision.

    ``feasible`` is the Bitmask of tokens every non-dropped active hard domain allows
    (``None`` when ``unconstrained``); ``logit_adjustments[i]`` is the soft adjustment of
    ``feasible_ids()[i]``. ``active_domains`` are the domains consulted; ``dropped``
    the hard domains the relaxation cascade dropped this step (``required_relaxation``
    is true iff there are any). ``terms`` are the soft scores with their factors
    (config weight · score weight / soft temperature), in the order they are added.
    """

    __slots__ = ("feasible", "active_domains", "phase", "unconstrained", "dropped", "terms",
                 "_count", "_masks", "_ids", "_adjustments", "_dense")

    def __init__(self, feasible: np.ndarray | None, active_domains: frozenset[Domain],
                 phase: Phase, *, unconstrained: bool = False,
                 dropped: list[Domain] | None = None, count: int = 0,
                 terms: Sequence[tuple[SoftScore, float]] = (),
                 masks: dict[Domain, np.ndarray] | None = None) -> None:
        self.feasible = feasible
        self.active_domains = active_domains
        self.phase = phase
        self.unconstrained = unconstrained
        self.dropped = dropped or []
        self.terms = tuple(terms)
        self._count = count
        self._masks = masks or {}
        self._ids: np.ndarray | None = None
        self._adjustments: np.ndarray | None = None
        self._dense: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def required_relaxation(self) -> bool:
        """Whether the intersection of the active hard domains was empty."""
        return bool(self.dropped)

    @property
    def n_feasible(self) -> int:
        """How many tokens are feasible (the bits of ``feasible``)."""
        if self.unconstrained:
            raise TetherError("this step is unconstrained: every token is feasible "
                              "(check FusionResult.unconstrained)")
        return self._count

    def feasible_ids(self) -> np.ndarray:
        """The sorted ids of the feasible tokens (int64)."""
        if self._ids is None:
            self._ids = bits.set_bits(self.feasible, self.n_feasible)
        return self._ids

    @property
    def logit_adjustments(self) -> np.ndarray:
        """The soft adjustment of each feasible token, parallel to :meth:`feasible_ids`
        (float32; empty for an unconstrained step)."""
        if self.unconstrained:
            return _NO_ADJUSTMENTS
        if self._adjustments is None:
            ids = self.feasible_ids()
            adj = np.zeros(ids.shape[0], dtype=np.float32)
            for score, factor in self.terms:
                score.add_at(adj, ids, self.feasible, factor)
            self._adjustments = adj
        return self._adjustments

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

    def apply(self, logits: np.ndarray, *, masked: bool = True) -> np.ndarray:
        """``logits + adjustment`` on the feasible tokens, ``-inf`` elsewhere (a new
        array; entries past the masks, e.g. a padded output layer, are ``-inf``).
        ``masked=False`` leaves the logits of the other tokens as they are."""
        logits = np.asarray(logits)
        out_dtype = logits.dtype if np.issubdtype(logits.dtype, np.floating) else np.float32
        if self.unconstrained:
            return logits.astype(out_dtype, copy=True)
        size = logits.shape[-1]
        if self._count * _SPARSE > self.feasible.shape[0] * 32:
            flags, adjustment = self._dense_form()
            if size < flags.shape[0] and flags[size:].any():
                self._too_short(size)
            out = np.empty(size, dtype=out_dtype)
            kernels.combine(out, logits, flags, adjustment, masked)
            return out
        ids = self.feasible_ids()
        if ids.size and ids[-1] >= size:
            self._too_short(size)
        out = np.full(size, -np.inf, dtype=out_dtype) if masked else logits.astype(out_dtype)
        out[ids] = logits[ids] + self.logit_adjustments
        return out

    def _too_short(self, size: int) -> None:
        last = int(self.feasible_ids()[-1])
        raise TetherError(f"{size} logits, but token {last} is feasible")

    def _dense_form(self) -> tuple[np.ndarray, np.ndarray]:
        """The feasible tokens as 0/1 flags and the soft step by token id (empty without
        soft terms), computed once."""
        if self._dense is None:
            size = self.feasible.shape[0] * 32
            adj = np.zeros(size if self.terms else 0, dtype=np.float32)
            for score, factor in self.terms:
                score.add_to(adj, factor)
            self._dense = bits.flags(self.feasible, size)[0], adj
        return self._dense
