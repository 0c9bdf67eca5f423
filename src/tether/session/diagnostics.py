"""Diagnostics of a generation (SPEC §9): what each step cost the model's distribution,
and what the run as a whole did.

Per sampled step, ``KL(p_constrained ‖ p) = −log Z``, where ``Z`` is the mass the model
(raw logits, temperature 1) put on the tokens the constraint allowed. Over a run, the
sum of ``log Z`` over sampled steps estimates ``log p(L)``, the log of the probability
that unconstrained sampling would have stayed in the constraint's language along this
path; the steps with the largest KL are where the model fights the constraint. Forced
tokens were not sampled (the model was not consulted): they carry no KL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FIGHTS = 5  # how many of the largest-KL steps a run reports


@dataclass(frozen=True)
class StepInfo:
    """Diagnostics of one generated token.

    ``kl`` is ``−log Z`` (``None`` for forced tokens), ``feasible`` the number of tokens
    the constraint allowed, ``logprob`` the chosen token's log-prob under the processed
    distribution. Fused steps also report the ``phase``, the hard domains the relaxation
    cascade ``dropped``, the domains ``skipped`` for time (``on_budget="relax"``), and
    each consulted domain's time in microseconds (``domain_us``).
    """

    token: int
    forced: bool
    kl: float | None = None
    feasible: int | None = None
    logprob: float | None = None
    phase: str | None = None
    dropped: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    domain_us: dict[str, float] = field(default_factory=dict)

    @property
    def log_z(self) -> float | None:
        """``log Z``, the log of the legal mass (``None`` for forced tokens)."""
        return None if self.kl is None else -self.kl

    @property
    def mass(self) -> float | None:
        """``Z``, the model's probability mass on the allowed tokens."""
        return None if self.kl is None else math.exp(-self.kl)

    def to_dict(self) -> dict[str, Any]:
        return {"token": self.token, "forced": self.forced, "kl": self.kl,
                "log_z": self.log_z, "mass": self.mass, "feasible": self.feasible,
                "logprob": self.logprob, "phase": self.phase, "dropped": list(self.dropped),
                "skipped": list(self.skipped), "domain_us": dict(self.domain_us)}


@dataclass(frozen=True)
class RunSummary:
    """The per-run view of the steps: ``kl_total`` (Σ KL), ``kl_mean`` and ``kl_max``
    over sampled steps, ``kl_max_step`` (its index, ``None`` if nothing was sampled),
    ``fights`` (indices of the largest-KL steps, largest first, KL > 0 only),
    ``log_p_estimate`` (Σ log Z over sampled steps) and the counts."""

    kl_total: float
    kl_mean: float
    kl_max: float
    kl_max_step: int | None
    fights: list[int]
    log_p_estimate: float
    n_sampled: int
    n_forced: int
    n_relaxed: int

    @classmethod
    def of(cls, steps: Sequence[StepInfo]) -> RunSummary:
        sampled = [(i, s.kl) for i, s in enumerate(steps) if s.kl is not None]
        kls = [kl for _, kl in sampled]
        total = math.fsum(kls)
        ranked = sorted((i for i, kl in sampled if kl > 0), key=lambda i: -steps[i].kl)
        return cls(
            kl_total=total,
            kl_mean=total / len(kls) if kls else 0.0,
            kl_max=max(kls, default=0.0),
            kl_max_step=ranked[0] if ranked else (sampled[0][0] if sampled else None),
            fights=ranked[:FIGHTS],
            log_p_estimate=math.fsum(s.log_z for s in steps if s.log_z is not None),
            n_sampled=len(kls),
            n_forced=sum(s.forced for s in steps),
            n_relaxed=sum(bool(s.dropped) for s in steps),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"kl_total": self.kl_total, "kl_mean": self.kl_mean, "kl_max": self.kl_max,
                "kl_max_step": self.kl_max_step, "fights": self.fights,
                "log_p_estimate": self.log_p_estimate, "n_sampled": self.n_sampled,
                "n_forced": self.n_forced, "n_relaxed": self.n_relaxed}
