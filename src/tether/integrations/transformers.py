"""A transformers logits processor that applies tether's masks (SPEC §10).

``TetherLogitsProcessor`` keeps one :class:`~tether.session.Session` per batch row (a
thin adapter: the session holds the row's matcher and budget). On each call it reports
the token each row generated since the previous call (``Session.advance``), builds the
batched Bitmask from the sessions' masks and sets the scores of disallowed tokens to
``-inf``. Given ``max_tokens`` (pass generate's ``max_new_tokens``), the masks are
budget-aware: a row only takes tokens after which its constraint can still be completed
within the tokens left (docs/generation.md). transformers applies custom processors
before its temperature/top-k/top-p warpers, so the mask is the outermost stage, as in
SPEC §9. It is duck-typed (transformers needs only ``__call__(input_ids, scores)``), and
torch is imported on the first call.

Use one processor per ``generate`` call. Beam search reorders rows between steps and is
not supported; greedy decoding and sampling (any batch size, ``num_return_sequences``)
are. Rows that consumed end of generation are left alone (transformers pads them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tether.engine import bitmask
from tether.engine.compiled import Compiled
from tether.engine.matcher import Matcher
from tether.errors import NoLegalContinuation, TetherError
from tether.session import Session


class TetherLogitsProcessor:
    """Mask a batch of logits with one matcher per row.

    ``constraint``: a compiled constraint (each row gets a fork of a fresh matcher, the
    batch size is taken from the first call) or a list with one entry per row, each a
    matcher or a compiled constraint (the row gets a fresh matcher of it) — rows of one
    batch may follow different constraints.
    ``max_tokens``: the budget of each row (``None``: none).
    """

    def __init__(self, constraint: Compiled | Sequence[Matcher | Compiled], *,
                 max_tokens: int | None = None) -> None:
        if isinstance(constraint, Compiled):
            self._compiled: Compiled | None = constraint
            self.matchers: list[Matcher] = []
        else:
            self._compiled = None
            self.matchers = [c.matcher() if isinstance(c, Compiled) else c for c in constraint]
            if not self.matchers:
                raise TetherError("TetherLogitsProcessor needs at least one matcher")
        self.max_tokens = max_tokens
        self.sessions: list[Session] = []
        self._length: int | None = None  # sequence length seen at the previous call

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        batch, length = int(input_ids.shape[0]), int(input_ids.shape[1])
        if self._length is None:
            self._start(batch)
        elif length == self._length + 1:
            self._consume(input_ids[:, -1].tolist())
        else:
            raise TetherError(f"sequence length went from {self._length} to {length}: use a "
                              "new TetherLogitsProcessor for each generate() call")
        self._length = length
        allowed = torch.from_numpy(self._allowed(int(scores.shape[-1])))
        return scores.masked_fill(~allowed.to(scores.device), float("-inf"))

    def _start(self, batch: int) -> None:
        if self._compiled is not None:
            first = self._compiled.matcher()
            self.matchers = [first] + [first.fork() for _ in range(batch - 1)]
        if len(self.matchers) != batch:
            raise TetherError(f"{len(self.matchers)} matchers for a batch of {batch} rows")
        self.sessions = [Session(m.vocab, m, max_tokens=self.max_tokens)
                         for m in self.matchers]

    def _consume(self, tokens: list[int]) -> None:
        for session, token in zip(self.sessions, tokens, strict=True):
            if not session.matcher.is_stopped:  # type: ignore[union-attr]
                session.advance(token)

    def _allowed(self, width: int) -> np.ndarray:
        """The (batch, width) bool mask; ids past the vocabulary are disallowed."""
        vocab_size = self.matchers[0].vocab.size
        words = np.zeros((len(self.matchers), bitmask.n_words(vocab_size)), dtype=np.uint32)
        for row, session in enumerate(self.sessions):
            if session.matcher.is_stopped:  # type: ignore[union-attr]
                words[row] = 0xFFFFFFFF  # finished row: its scores are ignored
            else:
                words[row] = session.mask()
        allowed = np.zeros((len(self.matchers), width), dtype=bool)
        size = min(width, vocab_size)
        allowed[:, :size] = bitmask.to_bool(words, size)
        empty = ~allowed.any(axis=1)
        if empty.any():
            raise NoLegalContinuation(f"no token is allowed for batch row(s) "
                                      f"{np.flatnonzero(empty).tolist()}")
        return allowed
