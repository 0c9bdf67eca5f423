"""`ModelLoop`: one model feeding one :class:`~tether.session.Session`, step by step.

Each step either consumes the tokens the constraint forces (jump-forward, the model not
consulted) or evaluates what the model has not read yet — those forced tokens and the
last decided one, in one batch — and lets the session decide one token from the logits.
:meth:`ModelLoop.steps` yields after every step, so a caller can stream, stop early
(cancelled request, deadline, stop string) or switch sessions between steps;
:func:`~tether.runtime.generate.generate` simply runs it to the end.

The model holds one sequence: the prompt must have been evaluated before the loop starts.
``pending`` are tokens already part of the text but not yet read by the model (a loop
that continues another one's text, :mod:`tether.serve.tools`). ``guard`` is held around
the session's work of a step and released around the forward pass (a server holds its
engine lock there, :mod:`tether.serve.worker`, so that constraints compile while the
model computes).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tether.session.session import Session

if TYPE_CHECKING:
    from tether.runtime.generate import Model


@dataclass(frozen=True)
class LoopStep:
    """What one step added: ``tokens`` (forced ones, or the decided one — none when the
    run ended without a token, e.g. on end of generation), whether they were ``forced``,
    and for a decided step the model's ``logits`` it was decided from (a view valid until
    the loop goes on)."""

    tokens: list[int]
    forced: bool
    logits: np.ndarray | None = None


class ModelLoop:
    """Drive ``session`` with ``lm`` (whose sequence already holds the prompt)."""

    def __init__(self, lm: Model, session: Session, pending: Sequence[int] = (),
                 guard: AbstractContextManager[object] | None = None) -> None:
        self.lm, self.session = lm, session
        self.guard = guard if guard is not None else nullcontext()
        self.pending = list(pending)
        self.evaluated = 0  # tokens of the session's text the model has read
        self.stop_reason: str | None = None

    def steps(self) -> Iterator[LoopStep]:
        """Run the session, yielding after each step; ``stop_reason`` is set at the end."""
        session = self.session
        while True:
            with self.guard:
                stop = session.stop_reason()
                forced = session.jump_forward() if stop is None else []
            if stop is not None:
                break
            if forced:
                yield LoopStep(forced, True)
                continue
            self.lm.eval(self.pending + session.tokens[self.evaluated:])
            self.pending, self.evaluated = [], len(session.tokens)
            logits = self.lm.logits()
            before = len(session.tokens)
            with self.guard:
                stop = session.decide(logits)
            yield LoopStep(session.tokens[before:], False, logits)
            if stop is not None:
                break
        self.stop_reason = stop

    def run(self) -> str:
        """Run to the end; the stop reason."""
        for _ in self.steps():
            pass
        return self.stop_reason  # type: ignore[return-value]

    def unread(self) -> list[int]:
        """Tokens of the text the model has not read yet (a loop continuing this one's
        text passes them as its ``pending``)."""
        return self.pending + self.session.tokens[self.evaluated:]
