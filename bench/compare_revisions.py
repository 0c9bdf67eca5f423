"""MaskBench mask times of the working tree against a git revision, run side by side.

On a shared machine, runs of one benchmark minutes apart differ by ±25 %: too much to
tell whether a change to the engine helped. This runs tether's MaskBench method
(``_maskbench_method.py``, timed) on the same schemas for both sources *at the same
time*, each pinned to its own core, so both see the same machine. The revision is
checked out in a temporary git worktree. The two cores of this machine differ by up to
10 %, so it runs twice, the sources swapping cores. Prints, per run and source, the sum
and mean of the times between masks (TBM) and the p50 of the time to first mask (TTFM),
the ratio of the working tree's TBM sum to the revision's and the schemas whose mask
time changed most; then the ratio both ways (the geometric mean of the two). Only the
schemas both sources pass count (a change may compile schemas that were refused).

Minutes apart, even that varies by ±8 % on this machine. ``--one-core`` runs both sources
at the same time on one core instead and compares the CPU time each thread spent in
masks, which sharing the core does not inflate: repeats agree within ~3 % (and, for
the per-token step generation also pays, the CPU time in ``consume``). It runs each
``--batch`` schemas (20) in fresh worker processes, as ``maskbench.py`` does: a process
that ran hundreds of schemas shares more across them (leaf frames) and collects more
garbage than one of maskbench's, so a change's gain there need not be maskbench's
(``--batch 0``: the whole sample in one process each).

    .venv/bin/python bench/compare_revisions.py [--base HEAD] [--sample 200 --seed 0]
                                                [--one-core [--batch 20]]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _side_by_side import ROOT, import_from, revision_tree, side_by_side, start_worker


def worker(src: str, out: str, sample: int, seed: int, first: int, count: int,
           tokenizer: str) -> None:
    """Time schemas ``first .. first + count - 1`` of the sample (all if ``count`` is 0)
    with tether from ``src`` and ``tokenizer``'s vocabulary; JSON to ``out``."""
    import_from(src)
    from _common import load
    from _maskbench_method import TetherEngine, run_schema, schema_files

    from tether.engine.regular import RegularMatcher

    cpu = [0.0]  # the thread's CPU time inside masks: not inflated by sharing a core
    depth = [0]  # (a matcher that wraps another is timed once, outermost)
    # The thread's CPU time from the start of a compile to the end of the first mask
    # after it (the time to first mask): its start while that mask is pending.
    ttfm_cpu, compile_started = [0.0], [None]

    def timed(mask: Callable) -> Callable:
        def timed_mask(self: RegularMatcher) -> np.ndarray:
            depth[0] += 1
            started = time.thread_time()
            try:
                return mask(self)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    cpu[0] += time.thread_time() - started
                    if compile_started[0] is not None:
                        ttfm_cpu[0] = time.thread_time() - compile_started[0]
                        compile_started[0] = None
        return timed_mask

    matchers = [RegularMatcher]
    try:  # (revisions before the matcher checked JSON values besides lack it)
        from tether.engine.json_checks import JsonChecksMatcher
        matchers.append(JsonChecksMatcher)
    except ImportError:
        pass
    consume_cpu = [0.0]  # the thread's CPU time inside consume (outermost matcher)
    consume_depth = [0]

    def timed_consume(consume: Callable) -> Callable:
        def timed(self: RegularMatcher, token: int) -> None:
            consume_depth[0] += 1
            started = time.thread_time()
            try:
                consume(self, token)
            finally:
                consume_depth[0] -= 1
                if not consume_depth[0]:
                    consume_cpu[0] += time.thread_time() - started
        return timed

    for cls in matchers:
        cls.mask = timed(cls.mask)  # type: ignore[method-assign]
        cls.consume = timed_consume(cls.consume)  # type: ignore[method-assign]
    tokenizers = load(tokenizer)
    engine = TetherEngine(tokenizers.tether_vocab)
    compile_schema = engine.compile

    def timed_compile(schema: object) -> object:
        compile_started[0] = time.thread_time()
        return compile_schema(schema)

    engine.compile = timed_compile  # type: ignore[method-assign]
    files = schema_files(sample, seed)
    run_schema(engine, files[0], tokenizers.encode, lambda t: b"")  # compiled code loaded
    results = {}
    for path in files[first:first + count] if count else files:
        cpu[0] = ttfm_cpu[0] = consume_cpu[0] = 0.0
        r = run_schema(engine, path, tokenizers.encode, lambda t: b"")
        results[path.name] = {"tbm": r["tbm_s"], "ttfm": r["ttfm_s"], "status": r["status"],
                              "cpu": cpu[0], "ttfm_cpu": ttfm_cpu[0],
                              "consume_cpu": consume_cpu[0]}
    Path(out).write_text(json.dumps(results))


def compare(base: dict, new: dict) -> float:
    """Print both runs and the largest changes; the ratio of the TBM sums. Only schemas
    both sources pass are compared (one may compile schemas the other refuses)."""
    both = [k for k in base if k in new and base[k]["status"] == new[k]["status"] == "pass"]
    print(f"  {len(both)} schemas passed by both ({len(base)} in the sample)")
    base, new = {k: base[k] for k in both}, {k: new[k] for k in both}
    for name, runs in (("revision", base), ("working tree", new)):
        tbm = np.concatenate([r["tbm"] for r in runs.values()] or [[]]) * 1e6
        ttfm = [r["ttfm"] for r in runs.values() if r["ttfm"] is not None]
        print(f"{name:>15}: TBM sum {tbm.sum() / 1e6:.2f} s, mean {tbm.mean():.1f} us, "
              f"p99 {np.percentile(tbm, 99):.0f} us; TTFM p50 {np.median(ttfm) * 1e3:.1f} ms")
    ratio = sum(sum(r["tbm"]) for r in new.values()) / sum(sum(r["tbm"]) for r in base.values())
    changes = sorted((sum(new[k]["tbm"]) - sum(base[k]["tbm"]), k) for k in base if k in new)
    print(f"  working tree / revision, TBM sum: {ratio:.3f}; largest changes (ms): " + ", ".join(
        f"{k} {d * 1e3:+.0f}" for d, k in changes[:3] + changes[-3:]))
    return ratio


def one_core(args: list[str], tree: Path, sample: int, batch: int) -> None:
    """Both sources at the same time on one core, twice: the ratio of the CPU time their
    masks took (each thread's own time, which sharing the core does not inflate), each
    ``batch`` schemas in fresh workers (0: all in one)."""
    with tempfile.TemporaryDirectory() as tmp:
        for k in (1, 2):
            results: list[dict] = [{}, {}]
            for first in range(0, sample, batch or sample):
                outs = [Path(tmp) / "base.json", Path(tmp) / "new.json"]
                part = [*args, "--first", str(first), "--count", str(batch)]
                runs = [start_worker(__file__, part, 1, tree, outs[0]),
                        start_worker(__file__, part, 1, ROOT, outs[1])]
                if any(r.wait() for r in runs):
                    raise SystemExit("a worker failed")
                for result, out in zip(results, outs, strict=True):
                    result.update(json.loads(out.read_text()))
            both = [k for k in results[0] if k in results[1]
                    and results[0][k]["status"] == results[1][k]["status"] == "pass"]
            base, new = (sum(r[k]["cpu"] for k in both) for r in results)
            base_ttfm, new_ttfm = (np.median([r[k]["ttfm_cpu"] for k in both]) * 1e3
                                   for r in results)
            base_step, new_step = (sum(r[k].get("consume_cpu", 0.0) for k in both)
                                   for r in results)
            print(f"run {k}: mask CPU time, revision {base:.2f} s, working tree {new:.2f} s: "
                  f"working tree / revision {new / base:.3f}; compile and first mask CPU "
                  f"time p50, revision {base_ttfm:.2f} ms, working tree {new_ttfm:.2f} ms: "
                  f"{new_ttfm / base_ttfm:.3f}; consume CPU time, revision {base_step:.2f} s, "
                  f"working tree {new_step:.2f} s: {new_step / max(base_step, 1e-9):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="git revision to compare with")
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", choices=("smollm2", "deepseek"), default="smollm2")
    parser.add_argument("--one-core", action="store_true",
                        help="run both on core 1 at once and compare the CPU time of masks")
    parser.add_argument("--batch", type=int, default=20,
                        help="with --one-core: schemas per worker process (0: all in one)")
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--worker", nargs=2, metavar=("SRC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.sample, args.seed, args.first, args.count, args.tokenizer)
        return
    sample = ["--sample", str(args.sample), "--seed", str(args.seed),
              "--tokenizer", args.tokenizer]
    if args.one_core:
        with revision_tree(args.base) as tree:
            start_worker(__file__, ["--sample", "10", "--tokenizer", args.tokenizer], 0, tree,
                         tree / "warm.json").wait()
            one_core(sample, tree, args.sample, args.batch)
        return
    ratios = []

    def report(base_core: int, new_core: int, base: dict, new: dict) -> None:
        print(f"revision on core {base_core}, working tree on core {new_core}:")
        ratios.append(compare(base, new))

    side_by_side(__file__, sample, args.base, ["--sample", "10", "--tokenizer", args.tokenizer],
                 report)
    print(f"working tree / revision, TBM sum, both ways: "
          f"{float(np.sqrt(ratios[0] * ratios[1])):.3f}")


if __name__ == "__main__":
    main()
