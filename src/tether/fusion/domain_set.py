"""`DomainSet`: the per-sequence driver of fusion — holds the domain plug-ins, asks each
active one for its mask or scores, times each against the intensity's budget, fuses, and
advances them all on the chosen token.

Per step: the config and phase choose the active domains (in the reasoning phase only
the reasoning-phase Syntax, free text unless one is given). With ``on_budget="relax"``,
when the last measured times predict the step would run over budget, domains are skipped
for the step — Semantics, ControlFlow, Imports, Types, in that order, Syntax never —
until the prediction fits; a skipped domain's estimate halves each step it sits out, so it
is tried again. Over budget is always reported. A hard domain that rejects a consumed
token (it was dropped by the relaxation cascade or skipped for time) cannot follow the
text any more: it is reported ``lost`` and left out until a rollback goes back before
that token.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tether.errors import ConstraintViolation, TetherError
from tether.fusion.config import FusionConfig
from tether.fusion.domains import (
    ALL_DOMAINS,
    BUDGET_SKIP_ORDER,
    HARD_DOMAINS,
    SOFT_DOMAINS,
    Domain,
    IntensityLevel,
    Phase,
    effective_phase,
)
from tether.fusion.fuse import fuse
from tether.fusion.plugins import HardDomain, Scorer
from tether.fusion.result import FusionResult
from tether.fusion.soft import SoftScore
from tether.vocab import Vocabulary

_REASONING_SYNTAX = "reasoning syntax"


@dataclass(frozen=True)
class StepReport:
    """What one step decided and what it cost.

    ``timings_ns`` holds each consulted domain's time; ``over_budget`` compares their sum
    with ``budget_us`` (the time of ``fuse`` itself is ``fuse_ns``, outside the budget).
    """

    result: FusionResult
    phase: Phase
    timings_ns: dict[Domain, int]
    fuse_ns: int
    budget_us: int
    over_budget: bool
    skipped: list[Domain]
    lost: list[Domain]

    @property
    def domains_ns(self) -> int:
        """The time of all consulted domains together."""
        return sum(self.timings_ns.values())


class DomainSet:
    """The domains of one generated sequence (see the module docstring)."""

    def __init__(self, config: FusionConfig, vocab: Vocabulary,
                 hard: Mapping[Domain, HardDomain], soft: Mapping[Domain, Scorer] | None = None,
                 *, reasoning_syntax: HardDomain | None = None) -> None:
        soft = soft or {}
        for d in hard:
            if d not in HARD_DOMAINS:
                raise TetherError(f"{d!r} is not a hard domain (Syntax, Types, Imports)")
        for d in soft:
            if d not in SOFT_DOMAINS:
                raise TetherError(f"{d!r} is not a soft domain (ControlFlow, Semantics)")
        if Domain.SYNTAX not in hard:
            raise TetherError("a DomainSet needs a Syntax domain")
        self.config = config
        self.vocab = vocab
        self._hard = dict(hard)
        self._soft = dict(soft)
        self._reasoning = reasoning_syntax
        self._phase = Phase.STRUCTURED_OUTPUT
        self._generated = bytearray()
        self._history: list[tuple[int, tuple]] = []  # per token: bytes before, who consumed
        self._lost: dict[Domain, int] = {}  # domain -> index of the token it rejected
        self._estimate_ns: dict[Domain, int] = {}

    def hard(self, domain: Domain) -> HardDomain | None:
        """The hard domain plug-in following the text for ``domain`` (``None``: absent,
        not consulted in the current phase, or lost)."""
        if domain not in self._hard or domain in self._lost or \
                domain not in self.config.domains_for(self._phase):
            return None
        return self._hard[domain]

    @property
    def generated(self) -> bytes:
        """The bytes of every token consumed so far."""
        return bytes(self._generated)

    # -- one step ----------------------------------------------------------------------
    def step(self, phase: Phase = Phase.STRUCTURED_OUTPUT) -> StepReport:
        """Compute the active domains' masks and scores for the next token and fuse them."""
        self._phase = phase = Phase(phase)
        config = self.config
        active = config.domains_for(phase)
        reasoning = effective_phase(phase, config.adaptive_switching) is Phase.REASONING
        skipped = self._plan_skips(active) if config.on_budget == "relax" else []
        exhaustive = config.intensity is IntensityLevel.EXHAUSTIVE
        timings: dict[Domain, int] = {}
        masks, scores, reasoning_mask = {}, {}, None
        if reasoning:
            if self._reasoning is not None and active:
                reasoning_mask = _timed(timings, Domain.SYNTAX, _mask, self._reasoning,
                                        exhaustive)
        else:
            generated = bytes(self._generated)
            for d in ALL_DOMAINS:
                if d not in active or d in skipped or d in self._lost:
                    continue
                if d in self._hard:
                    masks[d] = _timed(timings, d, _mask, self._hard[d], exhaustive)
                elif d in self._soft:
                    scores[d] = _timed(timings, d, _scores, self._soft[d], exhaustive,
                                       generated)
        started = time.perf_counter_ns()
        result = fuse(masks, scores, config, phase, reasoning_syntax=reasoning_mask)
        fuse_ns = time.perf_counter_ns() - started
        self._update_estimates(timings, skipped)
        budget = config.intensity.budget_us
        return StepReport(result, phase, timings, fuse_ns, budget,
                          sum(timings.values()) > budget * 1000, skipped, list(self._lost))

    def _plan_skips(self, active: frozenset[Domain]) -> list[Domain]:
        present = [d for d in active if d not in self._lost and
                   (d in self._hard or d in self._soft)]
        predicted = sum(self._estimate_ns.get(d, 0) for d in present)
        budget_ns = self.config.intensity.budget_us * 1000
        skipped = []
        for d in BUDGET_SKIP_ORDER:
            if predicted <= budget_ns:
                break
            if d in present:
                skipped.append(d)
                predicted -= self._estimate_ns.get(d, 0)
        return skipped

    def _update_estimates(self, timings: dict[Domain, int], skipped: list[Domain]) -> None:
        self._estimate_ns.update(timings)
        for d in skipped:
            self._estimate_ns[d] = self._estimate_ns.get(d, 0) // 2

    # -- following the text ---------------------------------------------------------------
    def consume(self, token_id: int) -> None:
        """Advance every domain active in the last step's phase on ``token_id``.

        Raises ``ConstraintViolation`` (nothing changed) if the Syntax domain rejects it.
        """
        token_id = int(token_id)
        data = self.vocab.token_bytes(token_id)
        config = self.config
        active = config.domains_for(self._phase)
        takers: list = []
        if effective_phase(self._phase, config.adaptive_switching) is Phase.REASONING:
            if self._reasoning is not None and active:
                self._reasoning.consume(token_id)
                takers.append(_REASONING_SYNTAX)
        else:
            for d in HARD_DOMAINS:
                if d in active and d in self._hard and d not in self._lost:
                    try:
                        self._hard[d].consume(token_id)
                    except ConstraintViolation:
                        if d is Domain.SYNTAX:
                            raise
                        self._lost[d] = len(self._history)
                        continue
                    takers.append(d)
            for d in SOFT_DOMAINS:
                if d in active and d in self._soft:
                    self._soft[d].consume(token_id)
                    takers.append(d)
        self._history.append((len(self._generated), tuple(takers)))
        self._generated += data

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` consumed tokens in every domain that took them."""
        if not 0 <= n <= len(self._history):
            raise TetherError(f"cannot roll back {n} tokens: {len(self._history)} consumed")
        if not n:
            return
        undone = self._history[-n:]
        del self._history[-n:]
        del self._generated[undone[0][0]:]
        for who, count in Counter(w for _, takers in undone for w in takers).items():
            self._plugin(who).rollback(count)
        self._lost = {d: at for d, at in self._lost.items() if at < len(self._history)}

    def fork(self) -> DomainSet:
        """An independent copy (every plug-in forked)."""
        twin = object.__new__(DomainSet)
        twin.__dict__.update(self.__dict__)
        twin._hard = {d: m.fork() for d, m in self._hard.items()}
        twin._soft = {d: s.fork() for d, s in self._soft.items()}
        twin._reasoning = self._reasoning.fork() if self._reasoning is not None else None
        twin._generated = bytearray(self._generated)
        twin._history = list(self._history)
        twin._lost = dict(self._lost)
        twin._estimate_ns = dict(self._estimate_ns)
        return twin

    def _plugin(self, who: Domain | str) -> HardDomain | Scorer:
        if who == _REASONING_SYNTAX:
            return self._reasoning
        return self._hard[who] if who in self._hard else self._soft[who]


def _timed(timings: dict[Domain, int], domain: Domain, fn: Callable[..., Any], *args: Any) -> Any:
    started = time.perf_counter_ns()
    out = fn(*args)
    timings[domain] = time.perf_counter_ns() - started
    return out


def _mask(domain: HardDomain, exhaustive: bool) -> np.ndarray:
    if exhaustive and hasattr(domain, "exhaustive_mask"):
        return domain.exhaustive_mask()
    return domain.mask()


def _scores(scorer: Scorer, exhaustive: bool, generated: bytes) -> SoftScore | None:
    if exhaustive and hasattr(scorer, "exhaustive_scores"):
        return scorer.exhaustive_scores(generated)
    return scorer.scores(generated)
