"""Assembling a run's session from what a caller gives: the constraint (compiled under
the generation policy), the fusion arguments (extra hard domains, soft scorers, phases)
and the decider. Runtimes call :func:`build_session` and only feed it logits."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tether.constraints import Constraint
from tether.engine.compiled import Compiled
from tether.engine.matcher import Matcher
from tether.errors import TetherError
from tether.fusion import Domain, FusionConfig, HardDomain, IntensityLevel, Scorer
from tether.session.fused import Decide, FreeText, FusedConstraint, Tokenizer
from tether.session.policy import compile_for_generation
from tether.session.session import Session, free_mask
from tether.vocab import Vocabulary

PHASE_MODES = ("off", "auto")


def constraint_matcher(constraint: Constraint | Compiled | str | None, vocab: Vocabulary,
                       extra_properties: str = "spec") -> Matcher | None:
    """A fresh matcher of ``constraint`` (compiled under the generation policy), its
    first mask computed (time to first mask counts as compilation, not decoding)."""
    if constraint is None:
        return None
    compiled = (constraint if isinstance(constraint, Compiled)
                else compile_for_generation(constraint, vocab, extra_properties))
    if compiled.vocab.fingerprint != vocab.fingerprint:
        raise TetherError("the constraint was compiled for another vocabulary than the model's")
    matcher = compiled.matcher()
    matcher.mask()
    return matcher


def fused_domains(vocab: Vocabulary, tokenizer: Tokenizer, matcher: Matcher | None,
                  config: FusionConfig | None = None, types: Any = None, imports: Any = None,
                  soft: Mapping[Domain, Scorer] | None = None,
                  phase: str = "off") -> FusedConstraint | None:
    """The run's fused domains, or ``None`` when no fusion argument is given. ``types`` /
    ``imports``: anything a constraint takes, or a hard-domain plug-in; without a
    ``config``, the smallest intensity that consults every domain given."""
    if phase not in PHASE_MODES:
        raise TetherError(f"phase must be one of {PHASE_MODES}, not {phase!r}")
    if config is None and types is None and imports is None and soft is None \
            and phase == "off":
        return None
    hard = {d: _hard_domain(spec, vocab) for d, spec in
            ((Domain.TYPES, types), (Domain.IMPORTS, imports)) if spec is not None}
    soft = dict(soft or {})
    if config is None:
        config = FusionConfig(intensity=_smallest_intensity(set(hard) | set(soft)))
    free = free_mask(vocab)
    syntax = matcher if matcher is not None else FreeText(free)
    return FusedConstraint(config, vocab, tokenizer, syntax, hard, soft, free,
                           phased=phase == "auto")


def build_session(vocab: Vocabulary, tokenizer: Tokenizer, matcher: Matcher | None,
                  decide: Decide, *, max_tokens: int | None, room: int | None = None,
                  fused: FusedConstraint | None = None, single_line: bool = False,
                  on_text: Callable[[str], None] | None = None) -> Session:
    """The session of one run: the fused domains if any, else the matcher."""
    return Session(vocab, fused if fused is not None else matcher, decide,
                   max_tokens=max_tokens, room=room,
                   tokenize=lambda data: tokenizer.tokenize(data, special=False),
                   single_line=single_line, on_text=on_text)


def _hard_domain(spec: Any, vocab: Vocabulary) -> HardDomain:
    """A hard-domain plug-in as given, or the matcher of a constraint."""
    if isinstance(spec, HardDomain):
        return spec
    return constraint_matcher(spec, vocab)  # type: ignore[return-value]


def _smallest_intensity(domains: set[Domain]) -> IntensityLevel:
    for level in (IntensityLevel.SYNTAX_ONLY, IntensityLevel.STANDARD,
                  IntensityLevel.FULL_HARD, IntensityLevel.FULL):
        if domains <= level.domains:
            return level
    return IntensityLevel.FULL
