"""Sessions under a budget, driven by random logits that favour long tokens (they like to
keep going): shared by ``test_budget.py`` (a few budgets per constraint) and
``bench/budget_sweep.py`` (200 per constraint)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tether.engine.compiled import Compiled
from tether.session import Session, decider


def shortest(compiled: Compiled, limit: int = 4096) -> int:
    """The fewest tokens that complete the constraint from its start."""
    matcher = compiled.matcher()
    return next(k for k in range(limit) if matcher.completes_within(k))


def run_session(compiled: Compiled, budget: int, seed: int) -> tuple[Session, str | None]:
    """One run: the session and why it stopped."""
    vocab = compiled.vocab
    rng = np.random.default_rng(seed)
    session = Session(vocab, compiled.matcher(), decider(vocab, seed=seed), max_tokens=budget)
    lengths = np.array([len(t) for t in vocab.tokens], dtype=np.float32)
    eos = sorted(vocab.eos_ids)
    while (stop := session.stop_reason()) is None:
        if session.jump_forward():
            continue
        logits = rng.normal(size=vocab.size).astype(np.float32) * 2 + lengths * 0.3
        logits[eos] -= 4.0
        stop = session.decide(logits)
        if stop is not None:
            break
    return session, stop


def budget_runs(compiled: Compiled, budgets: int, seed: int = 0
                ) -> Iterator[tuple[int, Session, str | None]]:
    """Runs with the shortest budget and ``budgets - 1`` drawn up to three times it."""
    needed = shortest(compiled)
    rng = np.random.default_rng(seed)
    draws = [needed] + rng.integers(needed, 3 * needed + 1, size=budgets - 1).tolist()
    for i, budget in enumerate(draws):
        session, stop = run_session(compiled, int(budget), seed + i)
        yield int(budget), session, stop
