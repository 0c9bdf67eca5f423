"""A transformers causal language model as a logits source for samplers that read the
model at prefixes of their own choosing — sequential Monte Carlo
(:mod:`tether.sampling.smc`) and beam search — with a whole step's prefixes in one
batched forward pass (docs/faithful-sampling.md). torch is imported on the first call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tether.errors import TetherError

MAX_BATCH = 64  # prefixes per forward pass (more are split)


class TransformersSource:
    """Next-token logits of ``model`` (a transformers causal LM) after ``prompt_ids``
    and a prefix. ``next_logits_batch`` runs several prefixes at once, left-padded with
    ``pad_id`` under an attention mask (each forward pass reads the whole prompt again:
    no cache is kept between calls)."""

    def __init__(self, model: Any, prompt_ids: Sequence[int], *, pad_id: int = 0,
                 max_batch: int = MAX_BATCH) -> None:
        if not prompt_ids:
            raise TetherError("the prompt is empty: give at least one token")
        self.model, self.prompt, self.pad_id = model, list(prompt_ids), pad_id
        self.max_batch = max_batch

    def next_logits(self, tokens: Sequence[int]) -> np.ndarray:
        return self.next_logits_batch([tokens])[0]

    def next_logits_batch(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        """One row of logits per prefix (float32, the model's vocabulary width)."""
        rows = [self._forward(prefixes[i:i + self.max_batch])
                for i in range(0, len(prefixes), self.max_batch)]
        return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)

    def _forward(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        import torch

        sequences = [self.prompt + list(p) for p in prefixes]
        width = max(map(len, sequences))
        ids = torch.full((len(sequences), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions)
        return out.logits[:, -1, :].float().numpy()
