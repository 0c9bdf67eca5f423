"""Deciding the next token (SPEC §9): the sampling pipeline, its DSL, beam search over
forked matchers and the deterministic decoder, with per-step diagnostics.

numpy and torch backends, one row or a batch; see :mod:`tether.sampling.engine`.
"""

from tether.sampling.beam import Hypothesis, LogitsSource, beam_search
from tether.sampling.deterministic import Confidence, Decision, DeterministicDecoder
from tether.sampling.dsl import Program, ProgramError, parse_program
from tether.sampling.engine import Step
from tether.sampling.pipeline import Pipeline

__all__ = [
    "Confidence",
    "Decision",
    "DeterministicDecoder",
    "Hypothesis",
    "LogitsSource",
    "Pipeline",
    "Program",
    "ProgramError",
    "Step",
    "beam_search",
    "parse_program",
]
