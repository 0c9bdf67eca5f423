"""`fuse`: one step of five-domain fusion (SPEC §7), in one pass.

1. The config's intensity and the phase choose the domains to consult.
2. The active hard masks are intersected with a bitwise AND of their ``uint32`` words.
3. If nothing survives: with ``allow_relaxation`` the cascade drops Imports, re-intersects,
   then drops Types (Syntax alone); if that is empty too (or relaxation is off),
   :class:`~tether.fusion.errors.FusionInfeasible` (a ``NoLegalContinuation``) is raised.
4. One additive soft step:
   ``adj[t] = Σ_d config_weight_d · weight_d · score_d[t] / soft_temperature``.
   Adjustments are finite, so soft scores never empty the feasible set. The step only
   records the scores and their factors: the :class:`FusionResult` computes the
   adjustments (and the feasible ids) when first asked, so the cost of ``fuse`` does
   not grow with the feasible set.

Applying the hard masks one after another and adding the soft scores one after another
gives the same result (the tests check it): the single pass is for speed and clarity.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tether import bits
from tether.errors import TetherError
from tether.fusion import kernels
from tether.fusion.config import FusionConfig
from tether.fusion.domains import (
    HARD_DOMAINS,
    RELAXATION_ORDER,
    SOFT_DOMAINS,
    Domain,
    Phase,
    effective_phase,
)
from tether.fusion.errors import FusionInfeasible
from tether.fusion.result import FusionResult
from tether.fusion.soft import SoftScore

_HARD = frozenset(HARD_DOMAINS)
_SOFT = frozenset(SOFT_DOMAINS)


def fuse(hard: Mapping[Domain, np.ndarray | None], soft: Mapping[Domain, SoftScore | None],
         config: FusionConfig, phase: Phase = Phase.STRUCTURED_OUTPUT, *,
         reasoning_syntax: np.ndarray | None = None) -> FusionResult:
    """Fuse one step's hard masks (Bitmask words by domain) and soft scores.

    A domain missing from ``hard``/``soft`` (or mapped to ``None``) is not consulted;
    Syntax is required whenever a domain is active. In the reasoning phase the Syntax
    used is the reasoning-phase language: ``reasoning_syntax`` when given, else free
    text, which makes the step unconstrained.
    """
    if phase.__class__ is not Phase:
        phase = Phase(phase)
    active = config.domains_for(phase)
    if not active:
        return FusionResult(None, active, phase, unconstrained=True)
    if effective_phase(phase, config.adaptive_switching) is Phase.REASONING:
        if reasoning_syntax is None:
            return FusionResult(None, active, phase, unconstrained=True)
        masks = _hard_masks({Domain.SYNTAX: reasoning_syntax}, active)
        scores: dict[Domain, SoftScore] = {}
    else:
        masks = _hard_masks(hard, active)
        scores = _soft_scores(soft, active)
    feasible, count, dropped = _intersect(masks, config.allow_relaxation, scores, phase)
    return FusionResult(feasible, frozenset(masks) | frozenset(scores), phase,
                        dropped=dropped, count=count, terms=_soft_terms(scores, config),
                        masks=masks)


def _hard_masks(hard: Mapping[Domain, np.ndarray | None],
                active: frozenset[Domain]) -> dict[Domain, np.ndarray]:
    masks = {}
    for d in HARD_DOMAINS:
        words = hard.get(d)
        if words is not None and d in active:
            if words.__class__ is not np.ndarray or words.dtype != np.uint32 or words.ndim != 1:
                raise TetherError(f"the {d.value} mask must be a 1-D uint32 Bitmask array")
            masks[d] = words
    if len(hard) > len(masks):
        for d in hard:
            if d not in _HARD:
                raise TetherError(f"{d!r} is not a hard domain (Syntax, Types, Imports)")
    syntax = masks.get(Domain.SYNTAX)
    if syntax is None:
        raise TetherError("fuse needs the Syntax mask (hard[Domain.SYNTAX]) whenever a "
                          "domain is active; use intensity none for an unconstrained step")
    for d, words in masks.items():
        if words.shape[0] != syntax.shape[0]:
            raise TetherError(f"the {d.value} mask has {words.shape[0]} words, the syntax "
                              f"mask {syntax.shape[0]}")
    return masks


def _soft_scores(soft: Mapping[Domain, SoftScore | None],
                 active: frozenset[Domain]) -> dict[Domain, SoftScore]:
    scores = {}
    for d, score in soft.items():
        if d not in _SOFT:
            raise TetherError(f"{d!r} is not a soft domain (ControlFlow, Semantics)")
        if score is not None and d in active:
            if score.__class__ is not SoftScore:
                raise TetherError(f"the {d.value} score must be a SoftScore")
            scores[d] = score
    return scores


def _intersect(masks: dict[Domain, np.ndarray], allow_relaxation: bool,
               scores: dict[Domain, SoftScore],
               phase: Phase) -> tuple[np.ndarray, int, list[Domain]]:
    live = list(masks.values())
    feasible, count = _and(live)
    dropped: list[Domain] = []
    while not count:
        victim = next((d for d in RELAXATION_ORDER if d in masks and d not in dropped), None)
        if not allow_relaxation or victim is None:
            allowed = {d: bits.count_bits(w) for d, w in masks.items()}
            raise FusionInfeasible(allowed, dropped, list(scores), phase)
        dropped.append(victim)
        feasible, count = _and([w for d, w in masks.items() if d not in dropped])
    return feasible, count, dropped


def _and(live: list[np.ndarray]) -> tuple[np.ndarray, int]:
    a = live[0]
    b = live[1] if len(live) > 1 else a
    c = live[2] if len(live) > 2 else b
    out = np.empty_like(a)
    return out, kernels.intersect(a, b, c, out)


def _soft_terms(scores: dict[Domain, SoftScore],
                config: FusionConfig) -> list[tuple[SoftScore, float]]:
    """The scores that count, each with its factor, in the order they are added."""
    terms = []
    for d, score in scores.items():
        factor = config.soft_factor(d) * score.weight
        if factor != 0.0:
            terms.append((score, factor))
    return terms
