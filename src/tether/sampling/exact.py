"""Exact output distributions of a finite constraint under a model, and the divergences
between distributions: the reference a faithful sampler is measured against
(docs/faithful-sampling.md).

:func:`exact_distributions` enumerates every token sequence the constraint allows and
that ends with end of generation (any tokenization of a valid text: masks allow them
all), scores each with the model, and sums them per output text:

* ``target``: p(x | x ∈ L) ∝ Σ over the sequences s spelling x of p(s · end),
  the model's own distribution restricted to the language;
* ``masking``: the distribution plain masking draws from, Π p(t_i | …) / Z_i over the
  same sequences (each step renormalised over the allowed tokens).

The language must be finite and small: more than ``max_sequences`` sequences, or one
longer than ``max_tokens``, raises :class:`~tether.errors.LimitExceeded`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from tether.engine.matcher import Matcher
from tether.errors import LimitExceeded
from tether.sampling.beam import LogitsSource
from tether.sampling.prefix_tree import PrefixTree
from tether.vocab import Vocabulary

MAX_SEQUENCES = 200_000


@dataclass(frozen=True)
class ExactDistributions:
    """Per output text (bytes): ``target`` and ``masking`` probabilities; ``log_mass``,
    log p(L) (the model's mass on the language); ``sequences`` (token sequences
    enumerated) and ``model_calls`` (prefixes scored)."""

    target: dict[bytes, float]
    masking: dict[bytes, float]
    log_mass: float
    sequences: int
    model_calls: int


@dataclass(frozen=True)
class Divergence:
    """KL(p ‖ q) in nats (``inf`` when q misses an outcome of p) and the total variation
    distance ½ Σ |p − q|."""

    kl: float
    tv: float


def exact_distributions(source: LogitsSource, vocab: Vocabulary, matcher: Matcher, *,
                        temperature: float = 1.0, max_sequences: int = MAX_SEQUENCES,
                        max_tokens: int = 64) -> ExactDistributions:
    """The target and masking distributions of ``matcher``'s (finite) language."""
    tree = PrefixTree(source, vocab, matcher, temperature=temperature)
    eos = vocab.end_of_generation
    target: dict[bytes, list[float]] = {}
    masking: dict[bytes, float] = {}
    sequences = 0
    # (prefix, its log-probability under the model, under masking, its bytes)
    work: list[tuple[tuple[int, ...], float, float, bytes]] = [((), 0.0, 0.0, b"")]
    while work:
        prefix, log_p, log_q, data = work.pop()
        node = tree.node(prefix)
        for token, lp in zip(node.ids.tolist(), node.logp.tolist(), strict=True):
            if eos[token]:
                sequences += 1
                if sequences > max_sequences:
                    raise LimitExceeded(f"the constraint allows more than {max_sequences} "
                                        "token sequences: too many to enumerate")
                target.setdefault(data, []).append(log_p + lp)
                masking[data] = masking.get(data, 0.0) + math.exp(log_q + lp - node.log_z)
            elif len(prefix) >= max_tokens:
                raise LimitExceeded(f"the constraint allows sequences longer than "
                                    f"{max_tokens} tokens: not a small finite language")
            else:
                work.append((prefix + (token,), log_p + lp, log_q + lp - node.log_z,
                             data + vocab.token_bytes(token)))
    per_text = {x: _logsumexp(v) for x, v in target.items()}
    log_mass = _logsumexp(list(per_text.values()))
    lost = sum(masking.values())  # < 1 only if masking met a dead end
    return ExactDistributions(
        {x: math.exp(v - log_mass) for x, v in per_text.items()},
        {x: v / lost for x, v in masking.items()} if lost > 0 else masking,
        log_mass, sequences, tree.model_calls)


def divergence(p: Mapping[Hashable, float], q: Mapping[Hashable, float]) -> Divergence:
    """KL(p ‖ q) and the total variation between two distributions over outcomes."""
    kl = 0.0
    for x, px in p.items():
        if px > 0:
            qx = q.get(x, 0.0)
            kl = math.inf if qx <= 0 else kl + px * math.log(px / qx)
            if kl == math.inf:
                break
    tv = 0.5 * sum(abs(p.get(x, 0.0) - q.get(x, 0.0)) for x in set(p) | set(q))
    return Divergence(kl, tv)


def empirical(draws: list[Hashable]) -> dict[Hashable, float]:
    """The empirical distribution of ``draws``."""
    counts: dict[Hashable, int] = {}
    for d in draws:
        counts[d] = counts.get(d, 0) + 1
    return {d: c / len(draws) for d, c in counts.items()}


def _logsumexp(values: list[float]) -> float:
    return float(np.logaddexp.reduce(np.array(values))) if values else -math.inf
