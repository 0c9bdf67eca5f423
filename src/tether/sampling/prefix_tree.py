"""The constrained prefix tree a faithful sampler walks: per prefix, the model's
distribution over the tokens the constraint allows next and their mass.

A :class:`PrefixTree` answers :meth:`PrefixTree.node` for any prefix (a tuple of token
ids): it asks the model for the next-token logits after the prefix (a
:class:`~tether.sampling.beam.LogitsSource`) and the constraint for its mask there (one
cursor :class:`~tether.engine.matcher.Matcher`, moved by rollback and consume), and
keeps the answer — many particles share prefixes, and the exact enumeration of
:mod:`tether.sampling.exact` visits each prefix once. :meth:`PrefixTree.proposal` is
what sequential Monte Carlo draws from there: exactly the target where what lies below
the prefix is small enough to sum (:meth:`PrefixTree.future`). Nodes are kept up to
``max_bytes`` (least recently used dropped first; a dropped node costs a model call
again).

A node's ``log_z`` is log Z, the model's probability mass on the allowed tokens: the
step's importance weight (:mod:`tether.sampling.smc`), and ``-log Z`` the KL of that
step (docs/generation.md, "Diagnostics").
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tether.engine import bitmask
from tether.engine.matcher import Matcher
from tether.errors import TetherError
from tether.sampling.beam import LogitsSource
from tether.sampling.rows import logsumexp
from tether.vocab import Vocabulary

MAX_TREE_BYTES = 256 << 20  # nodes kept per tree (a node holds its allowed ids and sums)
MAX_CACHED_FUTURES = 65_536  # masses below prefixes (and exact proposals) kept per tree
MAX_LOOKAHEAD_WIDTH = 64  # allowed tokens past which a prefix is not looked below


@dataclass(frozen=True)
class Node:
    """One prefix: the allowed tokens (``ids``, end of generation included when the
    constraint accepts), their log-probabilities under the model (``logp``, the full
    vocabulary's softmax), ``log_z`` (their log mass; ``-inf`` when nothing is allowed)
    and ``cdf``, the cumulative distribution of the model restricted to them."""

    ids: np.ndarray  # int64, sorted
    logp: np.ndarray  # float64
    log_z: float
    cdf: np.ndarray  # float64, last entry 1.0

    @property
    def nbytes(self) -> int:
        return self.ids.nbytes + self.logp.nbytes + self.cdf.nbytes + 64


@dataclass(frozen=True)
class Proposal:
    """What one step of sequential Monte Carlo draws from at a prefix: the allowed
    ``ids`` with cumulative probabilities ``cdf``; ``log_weight``, the log of the weight
    the step brings (before the division by what the step before already counted of
    it); per token, ``log_ahead``: what this step already counted of the next one's
    weight (``None``: nothing)."""

    ids: np.ndarray
    cdf: np.ndarray
    log_weight: float
    log_ahead: np.ndarray | None

    def draw(self, u: float) -> int:
        """The index (into ``ids``) of the token at uniform number ``u`` in [0, 1)."""
        return min(int(np.searchsorted(self.cdf, u, side="right")), self.ids.size - 1)


class PrefixTree:
    """Nodes of ``matcher``'s constraint under ``source``'s model (``temperature``
    divides the logits: the target is the tempered model). With ``max_tokens`` the
    masks are budget-aware (:meth:`~tether.engine.matcher.Matcher.mask_within`): every
    prefix can still be completed within ``max_tokens`` tokens, and at that length only
    end of generation is allowed."""

    def __init__(self, source: LogitsSource, vocab: Vocabulary, matcher: Matcher, *,
                 temperature: float = 1.0, max_tokens: int | None = None,
                 max_bytes: int = MAX_TREE_BYTES) -> None:
        if not temperature > 0:
            raise TetherError(f"temperature must be positive, not {temperature}")
        if not vocab.end_of_generation.any():
            raise TetherError("the vocabulary has no end-of-generation token: a sampled "
                              "text could never end")
        self.source, self.vocab, self.temperature = source, vocab, temperature
        self.max_tokens = max_tokens
        self._cursor = matcher.fork()
        self._at: list[int] = []  # the prefix the cursor stands at
        self._nodes: OrderedDict[tuple[int, ...], Node] = OrderedDict()
        self._futures: dict[tuple[int, ...], float] = {}  # prefix: log mass below it
        self._too_large: set[tuple[int, ...]] = set()  # prefixes with too much below
        self._proposals: dict[tuple[int, ...], Proposal] = {}  # exact ones
        self._bytes = 0
        self.max_bytes = max_bytes
        self.model_calls = 0

    def node(self, prefix: tuple[int, ...]) -> Node:
        """The node of ``prefix`` (computed once while kept)."""
        hit = self._nodes.get(prefix)
        if hit is not None:
            self._nodes.move_to_end(prefix)
            return hit
        words = self._mask_at(prefix)
        self.model_calls += 1
        return self._keep(prefix, self._node(words, self.source.next_logits(prefix)))

    def prefetch(self, prefixes: Sequence[tuple[int, ...]]) -> None:
        """Compute the nodes of ``prefixes`` not kept yet in one batched model call, if
        the source has ``next_logits_batch`` (a transformers model does)."""
        batch = getattr(self.source, "next_logits_batch", None)
        missing = list(dict.fromkeys(p for p in prefixes if p not in self._nodes))
        if batch is None or len(missing) < 2:
            return
        rows = batch(missing)
        self.model_calls += 1
        for prefix, logits in zip(missing, rows, strict=True):
            self._keep(prefix, self._node(self._mask_at(prefix), logits))

    def _keep(self, prefix: tuple[int, ...], node: Node) -> Node:
        self._nodes[prefix] = node
        self._bytes += node.nbytes
        while self._bytes > self.max_bytes and len(self._nodes) > 1:
            self._bytes -= self._nodes.popitem(last=False)[1].nbytes
        return node

    def proposal(self, prefix: tuple[int, ...], lookahead: int = 0) -> Proposal:
        """What SMC draws from after ``prefix``: the model restricted to the allowed
        tokens (weight Z) — or, where the texts below each allowed token take at most
        ``lookahead`` prefixes in all, the exact target over them: each token weighted
        by the model's whole mass on the texts below it (:meth:`future`). The step's
        weight is then the mass below ``prefix``, and the steps after it bring none
        (docs/faithful-sampling.md)."""
        node = self.node(prefix)
        plain = Proposal(node.ids, node.cdf, node.log_z, None)
        if node.log_z == -math.inf or self.future(prefix, lookahead) is None:
            return plain
        hit = self._proposals.get(prefix)
        if hit is None:
            eos = self.vocab.end_of_generation
            below = [0.0 if eos[t] else self.future(prefix + (t,), lookahead)
                     for t in node.ids.tolist()]
            if any(mass is None for mass in below):  # (dropped from a full cache)
                return plain
            log_ahead = np.array(below)
            scores = node.logp + log_ahead
            log_weight = logsumexp(scores)
            cdf = _cdf(scores, log_weight)
            if len(self._proposals) >= MAX_CACHED_FUTURES:
                self._proposals.clear()
            hit = self._proposals[prefix] = Proposal(node.ids, cdf, log_weight, log_ahead)
        return hit

    def future(self, prefix: tuple[int, ...], lookahead: int) -> float | None:
        """log of the model's mass on every text the constraint allows below
        ``prefix`` (end of generation included), if at most ``lookahead`` prefixes lie
        below it, each allowing at most ``MAX_LOOKAHEAD_WIDTH`` tokens (one model call
        each); ``None`` if not (known from the masks alone, before a model call)."""
        if prefix in self._futures:
            return self._futures[prefix]
        if prefix in self._too_large or lookahead <= 0:
            return None
        left = [lookahead]
        found = self._explore(prefix, left)
        if found is None:
            if len(self._too_large) >= MAX_CACHED_FUTURES:
                self._too_large.clear()
            self._too_large.add(prefix)
        return found

    def _explore(self, prefix: tuple[int, ...], left: list[int]) -> float | None:
        hit = self._futures.get(prefix)
        if hit is not None:
            return hit
        left[0] -= 1
        if left[0] < 0 or prefix in self._too_large:
            return None
        ids = self._allowed(prefix)
        if ids.size > MAX_LOOKAHEAD_WIDTH:
            return None
        eos = self.vocab.end_of_generation
        below = []
        for t in ids.tolist():
            if not eos[t]:
                found = self._explore(prefix + (t,), left)
                if found is None:
                    return None
                below.append(found)
        node = self.node(prefix)
        masses = iter(below)
        log_mass = logsumexp(np.array([lp if eos[t] else lp + next(masses) for t, lp
                                       in zip(node.ids.tolist(), node.logp.tolist(),
                                              strict=True)]))
        if len(self._futures) >= MAX_CACHED_FUTURES:
            self._futures.clear()
            self._proposals.clear()
        self._futures[prefix] = log_mass
        return log_mass

    def _allowed(self, prefix: tuple[int, ...]) -> np.ndarray:
        """The tokens the constraint allows after ``prefix`` (no model call)."""
        hit = self._nodes.get(prefix)
        if hit is not None:
            return hit.ids
        return bitmask.to_ids(self._mask_at(prefix), self.vocab.size)

    def _node(self, words: np.ndarray, logits: np.ndarray) -> Node:
        """The node of a prefix whose mask is ``words`` and whose next-token logits are
        ``logits``."""
        logits = np.asarray(logits, dtype=np.float64)
        if self.temperature != 1.0:
            logits = logits / self.temperature
        ids = bitmask.to_ids(words, min(self.vocab.size, logits.shape[0])).astype(np.int64)
        logp = logits[ids] - logsumexp(logits)
        log_z = logsumexp(logp)
        return Node(ids, logp, log_z, _cdf(logp, log_z))

    def _mask_at(self, prefix: Sequence[int]) -> np.ndarray:
        """The constraint's mask after ``prefix`` (the cursor moved there)."""
        common = 0
        for a, b in zip(self._at, prefix, strict=False):
            if a != b:
                break
            common += 1
        if common < len(self._at):
            self._cursor.rollback(len(self._at) - common)
            del self._at[common:]
        for token in prefix[common:]:
            self._cursor.consume(token)
            self._at.append(token)
        if self.max_tokens is None:
            return self._cursor.mask()
        return self._cursor.mask_within(self.max_tokens - len(prefix))


def _cdf(log_p: np.ndarray, log_total: float) -> np.ndarray:
    """The cumulative distribution of ``exp(log_p)`` normalised by ``exp(log_total)``
    (last entry exactly 1; all zeros when the total is 0)."""
    if log_total == -math.inf:
        return np.zeros(log_p.size)
    cdf = np.cumsum(np.exp(log_p - log_total))
    cdf[-1] = 1.0
    return cdf
