"""Beam search over forked matchers: the stateful ``beam k`` of the sampling DSL (SPEC §9).

Each hypothesis owns a fork of the constraint's :class:`~tether.engine.matcher.Matcher`,
so every beam is masked by its own state. A step scores each live beam's candidates by
the log-probabilities of the processed distribution (the program's or pipeline's stages
under the beam's mask, its tokens as history), keeps the ``width`` best continuations
overall (ties to the earlier beam, then the lower token id), and moves finished ones
aside: end of generation (``eog``), a constraint with nothing left but its end
(``constraint_complete``), or the token budget (``budget``). Scores are sums of
log-probabilities and only fall, so the search stops as soon as no live beam can beat
the ``width``-th finished one. The model is anything with ``next_logits(tokens)``.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from tether.engine import bitmask
from tether.engine.matcher import Matcher
from tether.errors import NoLegalContinuation, TetherError
from tether.sampling.engine import Step
from tether.sampling.rows import logsumexp
from tether.vocab import Vocabulary


class LogitsSource(Protocol):
    """A model seen by beam search: the next-token logits after the prompt it was
    built with followed by ``tokens``."""

    def next_logits(self, tokens: Sequence[int]) -> np.ndarray: ...


class Sampling(Protocol):
    """A :class:`~tether.sampling.Pipeline` or :class:`~tether.sampling.Program`."""

    def apply(self, logits: Any, mask: Any = None, history: Any = ()) -> Any: ...


@dataclass(frozen=True)
class Hypothesis:
    """A finished beam: its tokens (end of generation excluded), its score (the sum of
    ``steps``' log-probs), why it ended, and one :class:`Step` per decision (the end of
    generation token included)."""

    tokens: tuple[int, ...]
    score: float
    stop_reason: str
    steps: tuple[Step, ...]


@dataclass
class _Beam:
    tokens: list[int]
    score: float
    steps: list[Step]
    matcher: Matcher | None = field(repr=False)

    def grown(self, token: int, step: Step) -> _Beam:
        matcher = None
        if self.matcher is not None:
            matcher = self.matcher.fork()
            matcher.consume(token)
        return _Beam([*self.tokens, token], self.score + step.logprob, [*self.steps, step],
                     matcher)

    def finish(self, reason: str, step: Step | None = None) -> Hypothesis:
        steps = self.steps if step is None else [*self.steps, step]
        score = self.score + (step.logprob if step is not None else 0.0)
        return Hypothesis(tuple(self.tokens), score, reason, tuple(steps))


def beam_search(source: LogitsSource, vocab: Vocabulary, width: int, *,
                matcher: Matcher | None = None, sampling: Sampling | None = None,
                max_tokens: int = 64) -> list[Hypothesis]:
    """The best hypotheses (at most ``width``), best first.

    ``matcher``: the constraint's matcher in its current state (forked, never changed);
    ``None`` allows any text, control tokens other than end of generation excluded.
    ``sampling`` transforms each beam's logits before scoring (``None``: none).
    """
    if width < 1:
        raise TetherError(f"beam width must be ≥ 1, not {width}")
    free = bitmask.from_bool(~vocab.special | vocab.end_of_generation)
    alive = [_Beam([], 0.0, [], matcher.fork() if matcher is not None else None)]
    done: list[Hypothesis] = []
    while alive:
        if len(alive[0].tokens) >= max_tokens:
            done.extend(beam.finish("budget") for beam in alive)
            break
        candidates = [(beam.score + step.logprob, b, step)
                      for b, beam in enumerate(alive)
                      for step in _expand(source, vocab, beam, sampling, free, width)]
        candidates.sort(key=lambda c: (-c[0], c[1], c[2].token))
        previous, alive = alive, []
        for _, b, step in candidates:
            if len(alive) == width:
                break
            parent = previous[b]
            if vocab.is_eos(step.token):
                done.append(parent.finish("eog", step))
                continue
            child = parent.grown(step.token, step)
            if child.matcher is not None and child.matcher.is_finished():
                done.append(child.finish("constraint_complete"))
            else:
                alive.append(child)
        if len(done) >= width:
            floor = heapq.nlargest(width, (h.score for h in done))[-1]
            if not alive or alive[0].score < floor:
                break
    if not done:
        raise NoLegalContinuation("beam search found no hypothesis")
    done.sort(key=lambda h: (-h.score, h.tokens))
    return done[:width]


def _expand(source: LogitsSource, vocab: Vocabulary, beam: _Beam, sampling: Sampling | None,
            free: np.ndarray, width: int) -> list[Step]:
    """The ``width`` best next tokens of one beam, as steps (log-prob under the processed
    distribution, KL of the beam's mask)."""
    raw = np.asarray(source.next_logits(beam.tokens), dtype=np.float32)
    mask = free if beam.matcher is None else beam.matcher.mask()
    if sampling is None:
        processed = bitmask.apply_to_logits(raw, mask)
    else:
        processed = np.asarray(sampling.apply(raw, mask, beam.tokens), dtype=np.float32)
    live = np.flatnonzero(processed > -np.inf)
    if live.shape[0] == 0:
        return []
    logprobs = processed[live].astype(np.float64) - logsumexp(processed[live])
    best = _best(live, logprobs, width)
    allowed = bitmask.to_bool(mask, min(raw.shape[0], mask.shape[-1] * 32))
    clean = np.where(np.isnan(raw), np.float32(-np.inf), raw)
    log_z = min(logsumexp(clean[: allowed.shape[0]][allowed]) - logsumexp(clean), 0.0)
    feasible = int(np.count_nonzero(allowed & (clean[: allowed.shape[0]] > -np.inf)))
    return [Step(int(live[i]), float(logprobs[i]), log_z, feasible) for i in best]


def _best(ids: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best scores, best first, ties to the lower id."""
    if scores.shape[0] > k:
        kth = np.partition(scores, scores.shape[0] - k)[scores.shape[0] - k]
        keep = np.flatnonzero(scores >= kth)
    else:
        keep = np.arange(scores.shape[0])
    order = np.lexsort((ids[keep], -scores[keep]))
    return keep[order][:k]

