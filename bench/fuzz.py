"""The long fuzz run (docs/errors.md; ``make fuzz``): ``--inputs`` generated inputs spread
over every surface of tests/fuzz_surfaces.py, in worker processes, each input bounded in
time. Prints inputs tried, accepted, refused (a ``TetherError``) and failures per surface
with the time taken, lists each failure with its seed, and writes
``bench/results/fuzz.json``. Exit status 1 when any property fails.

    python bench/fuzz.py --inputs 100000 --workers 2 --seed 0
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections import Counter

import _common  # noqa: F401 - puts tests/ on the path
from fuzz_surfaces import SURFACES, Failure, run_one

RESULTS = _common.RESULTS / "fuzz.json"


def _work(job: tuple[str, int]) -> tuple[str, int, str, str]:
    surface, seed = job
    try:
        return surface, seed, run_one(SURFACES[surface], seed), ""
    except Failure as e:
        return surface, seed, "failure", str(e)[:500]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="first seed of every surface")
    args = parser.parse_args()
    names = sorted(SURFACES)
    jobs = [(names[i % len(names)], args.seed + i // len(names)) for i in range(args.inputs)]
    counts: dict[str, Counter] = {name: Counter() for name in names}
    failures: list[dict] = []
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")  # forked numba/llvm state can deadlock
    with context.Pool(args.workers, maxtasksperchild=2_000) as pool:
        for k, (surface, seed, outcome, detail) in enumerate(
                pool.imap_unordered(_work, jobs, chunksize=20), 1):
            counts[surface][outcome] += 1
            if outcome == "failure":
                failures.append({"surface": surface, "seed": seed, "detail": detail})
                print(f"FAIL {surface} seed {seed}: {detail}", file=sys.stderr, flush=True)
            if k % 2_000 == 0:
                print(f"[fuzz] {k}/{args.inputs} inputs, {len(failures)} failures, "
                      f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - started
    print(f"{'surface':16} {'inputs':>8} {'accepted':>9} {'refused':>8} {'failures':>9}")
    for name in names:
        c = counts[name]
        print(f"{name:16} {sum(c.values()):8} {c['accepted']:9} {c['refused']:8} "
              f"{c['failure']:9}")
    print(f"{args.inputs} inputs in {seconds:.0f} s with {args.workers} workers; "
          f"{len(failures)} failures")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"inputs": args.inputs, "seconds": round(seconds, 1),
                                   "seed": args.seed, "workers": args.workers,
                                   "counts": {n: dict(c) for n, c in counts.items()},
                                   "failures": failures}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
