"""A synthetic model for testing samplers: deterministic pseudo-random logits as a
function of the prefix, cheap enough to draw tens of thousands of texts
(docs/faithful-sampling.md)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class SyntheticSource:
    """Next-token logits over ``vocab_size`` tokens: standard normal numbers times
    ``scale``, seeded by ``seed`` and the prefix (the same prefix always gets the same
    logits). A :class:`~tether.sampling.beam.LogitsSource`."""

    def __init__(self, vocab_size: int, *, seed: int = 0, scale: float = 2.0) -> None:
        self.vocab_size, self.seed, self.scale = vocab_size, seed, scale

    def next_logits(self, tokens: Sequence[int]) -> np.ndarray:
        rng = np.random.default_rng([self.seed, len(tokens), *map(int, tokens)])
        return (rng.standard_normal(self.vocab_size) * self.scale).astype(np.float32)
