"""The deterministic decoder (SPEC §9; seed 001 without its bugs, SPEC §13): the pure
decision logic, with no model and no loop.

At each step the admissible tokens are those the constraint's mask allows, minus the
control tokens (the vocabulary's ``special`` flags) *except* the end-of-generation set,
so EOS can fire; in single-line mode, minus every token containing LF or CR too. The
decision is the argmax of the raw logits over the admissible tokens, ties to the lowest
id: a token is returned whenever an admissible one exists. The optional candidate pool
(the ``pool`` best admissible tokens, best first) is taken *after* these exclusions, by
``np.argpartition`` on the few tokens near the top, never a sort of the vocabulary.

Single-line mode **masks** newline tokens rather than stopping when the argmax contains
one: the line goes on with the best token without a newline. It stops with reason
``newline`` only when nothing but newline tokens is admissible (the constraint requires
a line break). The other stop reasons: ``eog`` (the decision is an end-of-generation
token), and, from the loop that drives the decoder, ``budget`` and
``constraint_complete``.

Each decision carries the chosen token's log-prob under the *full* softmax (every
token of the raw logits, temperature 1). :class:`Confidence` averages them over a run
and suppresses it below a floor; a missing log-prob counts as ``-inf``, so it can only
lower confidence, never raise it.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from tether.engine import bitmask
from tether.errors import NoLegalContinuation, TetherError
from tether.sampling.engine import Stages
from tether.sampling.rows import Context, Row
from tether.sampling.stages import TopK
from tether.vocab import Vocabulary

STOP_REASONS = ("eog", "newline", "budget", "constraint_complete")


@dataclass(frozen=True)
class Decision:
    """One step: ``token`` (``None`` when the step stops without one: ``stop ==
    "newline"``), its log-prob under the full softmax, the step's KL diagnostic
    (``log_z``: log of the raw mass on the admissible tokens), the number of admissible
    tokens, the candidate pool (best first; the token first) and the stop reason
    (``"eog"``, ``"newline"`` or ``None`` to go on)."""

    token: int | None
    logprob: float | None
    log_z: float
    feasible: int
    candidates: tuple[int, ...] = ()
    stop: str | None = None

    @property
    def kl(self) -> float:
        return -self.log_z


class Confidence:
    """The mean log-prob of a run's decisions, and whether it falls below ``floor``.

    Only decisions count (tokens the constraint forced were not chosen by the model);
    a decision whose log-prob is missing or not finite counts as ``-inf``."""

    def __init__(self, floor: float | None = None) -> None:
        self.floor = floor
        self.total = 0.0
        self.count = 0

    def add(self, logprob: float | None) -> None:
        """Count one decision."""
        self.count += 1
        if logprob is None or math.isnan(logprob):
            logprob = -math.inf
        self.total += logprob

    @property
    def mean(self) -> float | None:
        """The mean log-prob (``None`` before any decision)."""
        return self.total / self.count if self.count else None

    @property
    def suppressed(self) -> bool:
        """Whether a floor is set and the mean is below it."""
        mean = self.mean
        return self.floor is not None and mean is not None and mean < self.floor


@dataclass(frozen=True)
class DeterministicDecoder:
    """Argmax decoding over admissible tokens (see the module docstring).

    ``pool``: size of the candidate pool (0: just the token); ``single_line``: mask
    LF/CR tokens; ``confidence_floor``: the mean log-prob below which a run is
    suppressed (see :class:`Confidence`)."""

    pool: int = 0
    single_line: bool = False
    confidence_floor: float | None = None

    def __post_init__(self) -> None:
        if self.pool < 0:
            raise TetherError(f"the candidate pool must be ≥ 0, not {self.pool}")

    def admissible(self, vocab: Vocabulary, mask: np.ndarray | None = None) -> np.ndarray:
        """Bitmask words of the admissible tokens: ``mask`` (``None``: everything) minus
        control tokens other than end of generation, minus newline tokens in
        single-line mode."""
        words = _static_words(vocab, self.single_line)
        return words if mask is None else words & _fit(mask, words.shape[0])

    def confidence(self) -> Confidence:
        """A fresh :class:`Confidence` with this decoder's floor."""
        return Confidence(self.confidence_floor)

    def decide(self, logits: np.ndarray, vocab: Vocabulary,
               mask: np.ndarray | None = None) -> Decision:
        """The decision for one row of raw logits under the constraint's ``mask``."""
        words = self.admissible(vocab, mask)
        if not words.any():
            if self.single_line and self.admissible_with_newlines(vocab, mask).any():
                return Decision(None, None, -math.inf, 0, stop="newline")
            raise NoLegalContinuation("no admissible token at this step")
        ctx = Context.of(logits, words, ())
        if ctx.feasible == 0:
            raise NoLegalContinuation("no admissible token within the logits")
        stages = Stages((TopK(self.pool),) if self.pool else ())
        try:
            if ctx.peak == -math.inf:
                raise NoLegalContinuation("every logit is -inf or NaN")
            ids, vals = stages.solve(ctx, _top, truncating=False,
                                     reach=math.inf if self.pool else 0.0)
        except NoLegalContinuation:  # admissible tokens, all -inf or NaN: the first one
            token = int(np.flatnonzero(ctx.mask.view(bool))[0])
            return Decision(token, -math.inf, -math.inf, ctx.feasible, (token,),
                            _stop(vocab, token))
        best = _pool(ids, vals, max(self.pool, 1))
        token = int(best[0])
        logprob = float(ctx.x[token]) - ctx.log_total()
        return Decision(token, logprob, ctx.log_z(), ctx.feasible,
                        tuple(int(t) for t in best), _stop(vocab, token))

    def admissible_with_newlines(self, vocab: Vocabulary,
                                 mask: np.ndarray | None = None) -> np.ndarray:
        """:meth:`admissible` without the single-line exclusion."""
        words = _static_words(vocab, False)
        return words if mask is None else words & _fit(mask, words.shape[0])


def _stop(vocab: Vocabulary, token: int) -> str | None:
    return "eog" if vocab.is_eos(token) else None


def _top(row: Row) -> tuple[np.ndarray, np.ndarray]:
    """The row's ids and values, once its top is certain to hold the argmax."""
    row.peak()
    return row.token_ids(), row.vals


def _pool(ids: np.ndarray, vals: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best ids by value (finite ones), best first, ties to the lowest id
    (argpartition on the candidates, then a sort of ``k`` of them)."""
    finite = vals > -np.inf
    ids, vals = ids[finite], vals[finite]
    if vals.shape[0] > k:
        part = np.argpartition(-vals, k - 1)[:k]
        kth = vals[part].min()
        above = np.flatnonzero(vals > kth)
        tied = np.flatnonzero(vals == kth)[: k - above.shape[0]]
        keep = np.concatenate([above, tied])
    else:
        keep = np.arange(vals.shape[0])
    return ids[keep[np.lexsort((ids[keep], -vals[keep]))]]


def _fit(mask: np.ndarray, n_words: int) -> np.ndarray:
    words = np.asarray(mask, dtype=np.uint32).reshape(-1)
    if words.shape[0] >= n_words:
        return words[:n_words]
    return np.concatenate([words, np.zeros(n_words - words.shape[0], dtype=np.uint32)])


_STATIC: weakref.WeakKeyDictionary[Vocabulary, dict[bool, np.ndarray]] = (
    weakref.WeakKeyDictionary())


def _static_words(vocab: Vocabulary, single_line: bool) -> np.ndarray:
    """The admissible tokens before the constraint: not control unless end of
    generation; not containing LF/CR in single-line mode (cached per vocabulary)."""
    cached = _STATIC.setdefault(vocab, {})
    if single_line not in cached:
        allowed = ~vocab.special | vocab.end_of_generation
        if single_line:
            allowed = allowed & ~vocab.has_newline
        words = bitmask.from_bool(allowed)
        words.flags.writeable = False
        cached[single_line] = words
    return cached[single_line]
