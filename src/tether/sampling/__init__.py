"""Deciding the next token (SPEC §9): the sampling pipeline and its per-step diagnostics."""

from tether.sampling.pipeline import Pipeline, Step

__all__ = ["Pipeline", "Step"]
