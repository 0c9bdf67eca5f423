"""Sequential Monte Carlo over constrained prefixes: draws from p(x | x ∈ L), the
model's own distribution restricted to the constraint's language, instead of the
distorted distribution of masking (docs/faithful-sampling.md).

Masking draws each token from p(t | prefix, t allowed) = p(t | prefix) / Z, Z the
allowed mass, so a text x is drawn with probability p(x) / Π Z_i: texts whose prefixes
keep much mass outside the constraint are over-sampled. Weighting each draw by Π Z_i
corrects it. :class:`SMC` runs ``particles`` such draws side by side: each step extends
every unfinished particle with a token from its masked distribution and multiplies its
weight by that step's Z; when the effective sample size falls below
``ess_threshold × particles`` the particles are resampled (systematic resampling) and
their weights reset to the mean. A particle ends when it draws end of generation; ended
particles keep their weights and wait for the rest (they take part in resampling). The
answer is one particle drawn by weight. The mean weight estimates p(L), the model's mass
on the language (``log_marginal``).

Where the texts below a prefix take at most ``lookahead`` prefixes (the end of a text:
a last digit, the rest of an enum value), a step draws from the exact target there,
each allowed token weighted by the model's whole mass on the texts below it, and its
weight is that mass; the steps below bring no weight (a twisted proposal whose twist is
exact). Texts the model would not end where the constraint ends them (a digit the model
wants to follow with more) stop being over-proposed. With one particle and
``lookahead=0`` this is plain masking.

Particles share the :class:`~tether.sampling.prefix_tree.PrefixTree` of one constraint
and model: a prefix's model call and mask are computed once however many particles (or
runs of the same :class:`SMC`) reach it, and a step's new prefixes go to the model in
one batch where the source takes batches (``next_logits_batch``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tether.engine.matcher import Matcher
from tether.errors import BudgetTooSmall, NoLegalContinuation, TetherError
from tether.sampling.beam import LogitsSource
from tether.sampling.prefix_tree import MAX_TREE_BYTES, PrefixTree
from tether.sampling.rows import logsumexp
from tether.vocab import Vocabulary

MAX_PARTICLES = 4096
LOOKAHEAD = 64  # prefixes below a step summed at most to draw it exactly
MAX_LOOKAHEAD = 512


@dataclass(frozen=True)
class SMCResult:
    """One SMC draw: the chosen particle's ``tokens`` (end of generation excluded);
    ``log_marginal``, the log of the
    run's estimate of p(L); ``ess``, the effective sample size after each step (before
    any resampling); ``resampled``, the steps that resampled; ``model_calls``, the
    model calls this run made (prefixes not met before)."""

    tokens: tuple[int, ...]
    log_marginal: float
    ess: tuple[float, ...]
    resampled: int
    particles: int
    model_calls: int


def check_particles(particles: object) -> None:
    """Refuse a particle count that is not an int in 1..``MAX_PARTICLES``."""
    if not isinstance(particles, int) or isinstance(particles, bool) \
            or not 1 <= particles <= MAX_PARTICLES:
        raise TetherError(f"particles must be an int between 1 and {MAX_PARTICLES}, not "
                          f"{particles!r}")


def systematic_resample(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``len(weights)`` particles drawn in proportion to ``weights``
    (non-negative, not all zero) with one uniform number: particle ``i`` is drawn
    ⌊n·w_i⌋ or ⌈n·w_i⌉ times (w normalised)."""
    n = weights.size
    total = float(weights.sum())
    if not total > 0:
        raise TetherError("cannot resample particles that all have weight 0")
    cdf = np.cumsum(weights / total)
    cdf[-1] = 1.0
    positions = (rng.random() + np.arange(n)) / n
    return np.minimum(np.searchsorted(cdf, positions, side="right"), n - 1)


def effective_sample_size(log_weights: np.ndarray) -> float:
    """(Σ w)² / Σ w² of the weights ``exp(log_weights)`` (0 when all are 0)."""
    peak = float(log_weights.max())
    if peak == -math.inf:
        return 0.0
    w = np.exp(log_weights - peak)
    return float(w.sum() ** 2 / (w * w).sum())


class SMC:
    """A sequential Monte Carlo sampler for one constraint (``matcher``, at the start of
    the text) under one model (``source``: the logits after the prompt and a prefix)."""

    def __init__(self, source: LogitsSource, vocab: Vocabulary, matcher: Matcher, *,
                 particles: int = 16, ess_threshold: float = 0.5, max_tokens: int = 256,
                 temperature: float = 1.0, lookahead: int = LOOKAHEAD,
                 max_tree_bytes: int = MAX_TREE_BYTES) -> None:
        check_particles(particles)
        if not 0 <= ess_threshold <= 1:
            raise TetherError(f"ess_threshold must be in [0, 1], not {ess_threshold}")
        if not 0 <= lookahead <= MAX_LOOKAHEAD:
            raise TetherError(f"lookahead must be between 0 and {MAX_LOOKAHEAD}, not "
                              f"{lookahead}")
        if max_tokens < 1:
            raise TetherError(f"max_tokens must be at least 1, not {max_tokens}")
        if not matcher.completes_within(max_tokens):
            needed = matcher.completion_tokens()
            raise BudgetTooSmall(f"max_tokens ({max_tokens} tokens) is below the shortest "
                                 f"completion of the constraint ({needed} tokens)",
                                 needed=needed)
        self.vocab, self.particles = vocab, particles
        self.ess_threshold, self.max_tokens = ess_threshold, max_tokens
        self.lookahead = lookahead
        self.tree = PrefixTree(source, vocab, matcher, temperature=temperature,
                               max_tokens=max_tokens, max_bytes=max_tree_bytes)
        self._eos = vocab.end_of_generation

    def sample(self, seed: int | np.random.Generator | None = None) -> SMCResult:
        """One draw (``seed`` makes it reproducible)."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        n = self.particles
        calls_before = self.tree.model_calls
        prefixes: list[tuple[int, ...]] = [()] * n
        log_w = np.zeros(n)
        log_ahead = np.zeros(n)  # what each particle's last step counted of its next
        done = np.zeros(n, dtype=bool)
        log_marginal = 0.0  # what resampling took out of the weights, in log
        ess: list[float] = []
        resampled = 0
        while not done.all():
            live = np.flatnonzero(~done)
            self.tree.prefetch([prefixes[i] for i in live.tolist()])
            for i, u in zip(live.tolist(), rng.random(live.size).tolist(), strict=True):
                self._extend(i, u, prefixes, log_w, log_ahead, done)
            ess.append(effective_sample_size(log_w))
            if not done.all() and ess[-1] < self.ess_threshold * n and ess[-1] > 0:
                picked = systematic_resample(np.exp(log_w - log_w.max()), rng)
                log_marginal += logsumexp(log_w) - math.log(n)
                prefixes = [prefixes[j] for j in picked.tolist()]
                done, log_ahead = done[picked], log_ahead[picked]
                log_w = np.zeros(n)
                resampled += 1
        if log_w.max() == -math.inf:
            raise NoLegalContinuation(f"every one of the {n} particles met a dead end")
        cdf = np.cumsum(np.exp(log_w - log_w.max()))
        chosen = min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), n - 1)
        return SMCResult(prefixes[chosen],
                         log_marginal + logsumexp(log_w) - math.log(n), tuple(ess),
                         resampled, n, self.tree.model_calls - calls_before)

    def _extend(self, i: int, u: float, prefixes: list[tuple[int, ...]], log_w: np.ndarray,
                log_ahead: np.ndarray, done: np.ndarray) -> None:
        """Extend particle ``i`` by one token drawn at uniform ``u``."""
        proposal = self.tree.proposal(prefixes[i], self.lookahead)
        if proposal.log_weight == -math.inf:  # a dead end: this particle's weight is 0
            done[i] = True
            log_w[i] = -math.inf
            return
        k = proposal.draw(u)
        token = int(proposal.ids[k])
        log_w[i] += proposal.log_weight - log_ahead[i]
        log_ahead[i] = 0.0 if proposal.log_ahead is None else proposal.log_ahead[k]
        if self._eos[token]:
            done[i] = True
        else:
            prefixes[i] = prefixes[i] + (token,)
