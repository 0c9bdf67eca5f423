"""One sequence's model-independent state (SPEC §1, §9): the constraint or fused domains
with their phases, the decider, the budget, jump-forward and per-step diagnostics.
Runtimes (:mod:`tether.runtime`, :mod:`tether.integrations`) are adapters over
:class:`Session`, built by :func:`build_session` (:mod:`tether.session.build` assembles
matcher and fused domains); :mod:`tether.session.policy` is the JSON Schema generation
policy."""

from tether.session.build import (
    PHASE_MODES,
    build_session,
    constraint_matcher,
    fused_domains,
)
from tether.session.deciders import (
    DEFAULT_SAMPLING,
    SAMPLERS,
    Deterministic,
    Sampler,
    check_sampler,
    decider,
)
from tether.session.diagnostics import RunSummary, StepInfo
from tether.session.fused import FreeText, FusedConstraint
from tether.session.policy import (
    EXTRA_PROPERTIES,
    compile_for_generation,
    generation_constraint,
)
from tether.session.session import STOP_REASONS, Session, free_mask

__all__ = [
    "DEFAULT_SAMPLING",
    "EXTRA_PROPERTIES",
    "PHASE_MODES",
    "SAMPLERS",
    "STOP_REASONS",
    "Deterministic",
    "FreeText",
    "FusedConstraint",
    "RunSummary",
    "Sampler",
    "Session",
    "StepInfo",
    "decider",
    "build_session",
    "check_sampler",
    "compile_for_generation",
    "constraint_matcher",
    "free_mask",
    "fused_domains",
    "generation_constraint",
]
