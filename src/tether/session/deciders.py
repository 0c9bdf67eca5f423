"""What decides a token from the logits under a mask: a sampling pipeline or program,
or the deterministic decoder (SPEC §9). Each returns ``(token, diagnostics, stop)``
(:data:`~tether.session.fused.Choice`); a ``beam k`` program is run whole by the
runtime instead (it re-reads the model per beam), and so is sequential Monte Carlo
(``sampler="smc"``, :func:`check_sampler` says what it runs with)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from tether.errors import TetherError
from tether.sampling import DeterministicDecoder, Pipeline, Program, parse_program
from tether.sampling.deterministic import Confidence
from tether.sampling.smc import check_particles
from tether.session.diagnostics import StepInfo
from tether.session.fused import Choice
from tether.vocab import Vocabulary

DEFAULT_SAMPLING = Pipeline(temperature=0.7, min_p=0.05)


class Sampler:
    """Decisions by a pipeline or a (non-beam) program."""

    def __init__(self, sampling: Pipeline | Program, vocab: Vocabulary,
                 rng: np.random.Generator) -> None:
        self.sampling, self.vocab, self.rng = sampling, vocab, rng

    def __call__(self, logits: np.ndarray, mask: np.ndarray | None,
                 history: Sequence[int]) -> Choice:
        step = self.sampling.sample(logits, mask, history=history, rng=self.rng)
        info = StepInfo(token=step.token, forced=False, kl=step.kl, feasible=step.feasible,
                        logprob=step.logprob)
        return step.token, info, "eog" if self.vocab.is_eos(step.token) else None


class Deterministic:
    """Decisions by the deterministic decoder, with the run's confidence."""

    def __init__(self, decoder: DeterministicDecoder, vocab: Vocabulary) -> None:
        self.decoder, self.vocab = decoder, vocab
        self.confidence: Confidence = decoder.confidence()

    def __call__(self, logits: np.ndarray, mask: np.ndarray | None,
                 history: Sequence[int]) -> Choice:
        decision = self.decoder.decide(logits, self.vocab, mask)
        if decision.token is None:
            return None, None, decision.stop
        self.confidence.add(decision.logprob)
        info = StepInfo(token=decision.token, forced=False, kl=decision.kl,
                        feasible=decision.feasible, logprob=decision.logprob)
        return decision.token, info, decision.stop


def decider(vocab: Vocabulary, sampling: Pipeline | Program | str | None = None,
            temperature: float | None = None,
            deterministic: bool | DeterministicDecoder = False,
            seed: int | None = None) -> Sampler | Deterministic | Program:
    """What makes the decisions: a sampler, the deterministic decoder, or a beam program
    (returned as is: the runtime runs it whole)."""
    if deterministic:
        if sampling is not None or temperature is not None:
            raise TetherError("deterministic decoding takes no sampling settings "
                              "(sampling= or temperature=)")
        decoder = (deterministic if isinstance(deterministic, DeterministicDecoder)
                   else DeterministicDecoder())
        return Deterministic(decoder, vocab)
    if isinstance(sampling, str):
        sampling = parse_program(sampling)
    chosen = sampling or DEFAULT_SAMPLING
    if temperature is not None:
        if not isinstance(chosen, Pipeline):
            raise TetherError("temperature= applies to a Pipeline; write `temperature t` "
                              "in the sampling program instead")
        chosen = replace(chosen, temperature=temperature)
    if isinstance(chosen, Program) and chosen.pick == "beam":
        return chosen
    if seed is not None and (not isinstance(seed, int) or seed < 0):
        raise TetherError(f"seed must be an int ≥ 0, not {seed!r}")
    return Sampler(chosen, vocab, np.random.default_rng(seed))


SAMPLERS = ("mask", "smc")


def check_sampler(sampler: str, particles: int, constraint: object, sampling: object,
                  temperature: float | None, deterministic: object, fused: bool) -> None:
    """Refuse settings that ``sampler`` (``mask``: token by token; ``smc``: sequential
    Monte Carlo, :mod:`tether.sampling.smc`) cannot run with."""
    if sampler not in SAMPLERS:
        raise TetherError(f"sampler must be one of {', '.join(SAMPLERS)}, not {sampler!r}")
    if sampler == "mask":
        return
    if constraint is None:
        raise TetherError("sampler 'smc' corrects what a constraint does to the model's "
                          "distribution: give it a constraint")
    if sampling is not None or deterministic:
        raise TetherError("sampler 'smc' draws from the model's own distribution: it takes "
                          "no sampling program and no deterministic decoding (temperature "
                          "sets the target's temperature)")
    if fused:
        raise TetherError("sampler 'smc' does not run with fusion (fusion, types, imports, "
                          "soft, phase)")
    if temperature is not None and not temperature > 0:
        raise TetherError(f"sampler 'smc' needs a temperature above 0, not {temperature}")
    check_particles(particles)
