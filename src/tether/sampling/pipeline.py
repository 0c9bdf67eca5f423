"""The sampling pipeline (SPEC §9): one token decision from logits.

Stages run in a fixed order, mask outermost::

    mask → temperature → repetition/presence/frequency penalties → top-k → top-p → min-p → pick

A :class:`Pipeline` is a set of settings that compiles to the stages of
:mod:`tether.sampling.stages` (the DSL's programs compile to the same objects) and
runs them through :mod:`tether.sampling.engine`: numpy or torch, one row or a batch.
On numpy, the mask first shrinks the row to its feasible tokens and each truncation
stage shrinks it again, so later stages and the draw only touch what is left; on a
large vocabulary only the tokens near the top are materialised at all. Nothing sorts
the vocabulary. :meth:`Pipeline.apply` shows removed tokens as ``-inf``. An empty
feasible set raises :class:`~tether.errors.NoLegalContinuation`, never NaN.

Each decision is reported as a :class:`Step`, which carries the constraint diagnostic of
SPEC §9: ``log_z``, the log of the probability mass the model (raw logits, temperature 1)
puts on the allowed tokens, so that ``KL(p_constrained ‖ p) = -log_z`` for that step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tether.errors import TetherError
from tether.sampling.engine import Stages, Step
from tether.sampling.stages import MinP, Penalties, Stage, Temperature, TopK, TopP

__all__ = ["Pipeline", "Step"]


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

    ``logits`` may be a numpy array or a torch tensor, 1-D (one row) or 2-D (a batch);
    masks are Bitmask words, ``(words,)`` or ``(batch, words)``. A batch gives a batch
    of processed logits and a list of :class:`Step`.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    _plan: Stages = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        numbers = {"temperature": self.temperature, "top_p": self.top_p, "min_p": self.min_p,
                   "repetition_penalty": self.repetition_penalty,
                   "presence_penalty": self.presence_penalty,
                   "frequency_penalty": self.frequency_penalty}
        checks = [
            *((math.isfinite(v), f"{k} must be a finite number, not {v!r}")
              for k, v in numbers.items()),
            (self.temperature >= 0, "temperature must be ≥ 0"),
            (self.top_k >= 0, "top_k must be ≥ 0"),
            (0 < self.top_p <= 1, "top_p must be in (0, 1]"),
            (0 <= self.min_p <= 1, "min_p must be in [0, 1]"),
            (self.repetition_penalty > 0, "repetition_penalty must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise TetherError(f"invalid sampling settings: {message}")
        object.__setattr__(self, "_plan", Stages(self.stages()))

    def stages(self) -> tuple[Stage, ...]:
        """The stages these settings compile to, in order (the mask comes first)."""
        stages: list[Stage] = []
        if self.temperature not in (0, 1):
            stages.append(Temperature(self.temperature))
        if (self.repetition_penalty, self.presence_penalty, self.frequency_penalty) != (1, 0, 0):
            stages.append(Penalties(self.repetition_penalty, self.presence_penalty,
                                    self.frequency_penalty))
        if self.top_k > 0:
            stages.append(TopK(self.top_k))
        if self.top_p < 1:
            stages.append(TopP(self.top_p))
        if self.min_p > 0:
            stages.append(MinP(self.min_p))
        return tuple(stages)

    def apply(self, logits: Any, mask: Any = None, history: Any = ()) -> Any:
        """The processed logits (float32, full length, ``-inf`` where a stage removed
        the token): a numpy array or a tensor like ``logits``."""
        return self._plan.apply(logits, mask, history)

    def sample(self, logits: Any, mask: Any = None, history: Any = (),
               rng: np.random.Generator | None = None) -> Step | list[Step]:
        """Draw a token from the processed distribution (argmax when ``temperature=0``)."""
        return self._plan.decide(logits, mask, history, rng, greedy=self.temperature == 0)

    def argmax(self, logits: Any, mask: Any = None, history: Any = ()) -> Step | list[Step]:
        """The most likely token after processing (ties to the lowest id)."""
        return self._plan.decide(logits, mask, history, None, greedy=True)
