"""Cost of one step of fusion on a 129k vocabulary (DeepSeek V4's 129,280 tokens).

``fuse`` gets three hard masks (Syntax, Types, Imports) and two soft scores
(ControlFlow: a dense float32 array over the vocabulary; Semantics: sparse, 1,000 ids)
at intensity ``full``. Scenarios differ by mask densities: from a structural position
(a handful of tokens) to free string content (nearly every token). ``fuse`` ANDs the
masks and counts the survivors, so its cost should not depend on them; the feasible
ids and the adjustments are computed when first asked for (``apply`` works on the ids
when few tokens are feasible, on dense vectors when many are). Each scenario cycles
through 8 independent draws of masks and scores (fixed seed), so caches are not warmer
than in a generation loop. Reported: ``fuse`` alone, and ``fuse`` plus
``FusionResult.apply`` to a logit vector (what a decoding step needs).

    taskset -c 1 .venv/bin/python bench/fusion_cost.py [--steps 3000]

Target (issue 3): ``fuse`` ≤ 30 µs median in every scenario.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import save, summary

from tether.engine import bitmask
from tether.fusion import Domain, FusionConfig, SoftScore, fuse

VOCAB = 129_280
DRAWS = 8
TARGET_US = 30.0
# name: (Syntax, Types, Imports) densities
SCENARIOS = {
    "structural (≈60 feasible)": (0.001, 0.5, 0.95),
    "typical code step (≈1.8k feasible)": (0.3, 0.05, 0.95),
    "broad types (≈11k feasible)": (0.3, 0.3, 0.95),
    "string content (≈117k feasible)": (0.95, 1.0, 0.95),
}


def draw(rng: np.random.Generator, densities: tuple[float, float, float]) -> tuple:
    hard = {d: bitmask.from_bool(rng.random(VOCAB) < p)
            for d, p in zip((Domain.SYNTAX, Domain.TYPES, Domain.IMPORTS), densities,
                            strict=True)}
    dense = rng.normal(0, 0.7, VOCAB).astype(np.float32)
    sparse_ids = rng.choice(VOCAB, 1_000, replace=False)
    soft = {Domain.CONTROL_FLOW: SoftScore(dense, 0.5),
            Domain.SEMANTICS: SoftScore.sparse(sparse_ids, rng.uniform(-1, 1, 1_000))}
    logits = rng.normal(0, 3, VOCAB).astype(np.float32)
    return hard, soft, logits


def measure(cases: list[tuple], config: FusionConfig, steps: int) -> dict[str, list[float]]:
    fuse_s, step_s = [], []
    for i in range(steps):
        hard, soft, logits = cases[i % len(cases)]
        started = time.perf_counter_ns()
        result = fuse(hard, soft, config)
        fused = time.perf_counter_ns()
        result.apply(logits)
        done = time.perf_counter_ns()
        fuse_s.append((fused - started) / 1e9)
        step_s.append((done - started) / 1e9)
    return {"fuse": fuse_s, "fuse_apply": step_s,
            "feasible": [len(fuse(*c[:2], config).feasible_ids()) for c in cases]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    config = FusionConfig(intensity="full")
    rows = {}
    print(f"fuse, 3 hard masks + 2 soft scores (dense, sparse), {VOCAB:,} tokens, "
          f"{args.steps} steps per scenario")
    print(f"{'scenario':38} {'feasible':>9} {'fuse median':>12} {'p99':>8} "
          f"{'+apply median':>14}")
    for name, densities in SCENARIOS.items():
        cases = [draw(rng, densities) for _ in range(DRAWS)]
        measure(cases, config, 50)  # warm up (numba's cached machine code, caches)
        runs = measure(cases, config, args.steps)
        fuse_stats, step_stats = summary(runs["fuse"]), summary(runs["fuse_apply"])
        rows[name] = {"densities": densities, "feasible_mean": float(np.mean(runs["feasible"])),
                      "fuse": fuse_stats, "fuse_apply": step_stats}
        print(f"{name:38} {np.mean(runs['feasible']):9.0f} {fuse_stats['median_us']:10.1f}µs "
              f"{fuse_stats['p99_us']:6.1f}µs {step_stats['median_us']:12.1f}µs")
    worst = max(row["fuse"]["median_us"] for row in rows.values())
    verdict = "within" if worst <= TARGET_US else "OVER"
    print(f"fuse: worst scenario median {worst:.1f} µs — {verdict} the {TARGET_US:.0f} µs "
          "target")
    path = save("fusion_cost", {"vocab": VOCAB, "steps": args.steps, "scenarios": rows,
                                "worst_fuse_median_us": worst, "target_us": TARGET_US})
    print(f"saved {path}")


if __name__ == "__main__":
    main()
