"""What budget-aware masks cost: MaskBench walks without and with a budget.

For a seeded sample of MaskBench schemas (SmolLM2 tokenizer) each valid instance is
walked token by token through a :class:`~tether.session.Session` three times, each on a
fresh compile (cold caches alike; what is shared per vocabulary, as a server would, is
warmed up first by a walk on a compile of its own):

- *plain*: no budget (``Session.mask()`` and ``Session.advance``: the MaskBench work per
  token, as a runtime does it);
- *mask path* (what the vLLM and transformers adapters do): with the budget,
  ``Session.mask()`` (budget-aware) and ``Session.advance``;
- *decision path* (what ``generate()``, the server and ``Session.decide`` do): with the
  budget, the constraint's mask, the check on the token taken (``completes_after`` it in
  the tokens left: a token that does not fit is refused and the decider asked again)
  and ``Session.advance``.

The budget is ``--budget`` (256, generate's default) or the instance's own length if
longer; ``--budget 0`` makes it the instance's length (``--slack`` more) so that the
budget bites over the last tokens of every instance (the worst case). Reports TBM
mean/p50/p99 of each and the ratios of the means to plain, and *refusals*: tokens of a
valid instance the budget took out (mask path) or refused (decision path) although the
instance fits the budget (must be 0).

    taskset -c 1 .venv/bin/python bench/budget_cost.py [--sample 200 --seed 0]
                                                        [--budget 256] [--slack 0]

Runs minutes apart differ by ±10 % in the plain mean on this machine; ``--base REV``
measures a git revision and the working tree at the same time, one per core, then with
the cores swapped (``_side_by_side.py``), and prints both.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from _side_by_side import import_from, side_by_side

PATHS = ("plain", "mask", "decision")


def walk(compiled: Any, tokens: list[int], budget: int | None,
         path: str, times: list[float]) -> int:
    """Walk ``tokens`` through a session (``path``: "plain", "mask" or "decision"; see
    the module docstring); append each step's time; return the tokens the budget refused
    (taken out of the mask, or refused by the check)."""
    from tether.engine import bitmask
    from tether.session import Session

    matcher = compiled.matcher()
    session = Session(compiled.vocab, matcher, max_tokens=budget)
    refused = 0
    for token in tokens:
        started = time.perf_counter()
        if path == "decision":
            words = matcher.mask()
            fits = matcher.completes_after(token, session.tokens_left - 1)
        else:
            words = session.mask()
            fits = bitmask.is_allowed(words, token)
        legal = bitmask.is_allowed(words if path == "decision" else matcher.mask(), token)
        if legal:
            session.advance(token)
        times.append(time.perf_counter() - started)
        if not (fits and legal):
            refused += 1
            if not legal:
                break  # the instance itself is rejected: nothing to compare after it
    return refused


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Walk the sample's valid instances on each path; the summaries and refusals."""
    from _common import load, summary
    from _maskbench_method import schema_files, serialise

    import tether
    import tether.compiler

    tok = load("smollm2")
    times: dict[str, list[float]] = {name: [] for name in PATHS}
    refusals = {"mask": 0, "decision": 0}
    instances = n_schemas = 0
    for path in schema_files(args.sample, args.seed):
        data = json.loads(path.read_text())
        walks = [tok.encode(serialise(t["data"])) for t in data.get("tests", []) if t["valid"]]
        if not walks:
            continue
        try:
            compiled = {}
            for name in ("warm-up", *times):
                tether.compiler.clear_cache()
                compiled[name] = tether.compile(tether.JsonSchema(data["schema"]),
                                                tok.tether_vocab)
        except tether.CompileError:
            continue
        for tokens in walks:  # what is shared per vocabulary warms up, for each path alike
            walk(compiled["warm-up"], tokens, None, "plain", [])
        order = list(times)[n_schemas % 3:] + list(times)[:n_schemas % 3]
        n_schemas += 1
        for tokens in walks:
            budget = max(args.budget, len(tokens) + args.slack)
            steps: dict[str, list[float]] = {name: [] for name in order}
            refused: dict[str, int] = {}
            for name in order:  # each path first as often
                try:
                    refused[name] = walk(compiled[name], tokens,
                                         None if name == "plain" else budget, name, steps[name])
                except tether.errors.BudgetTooSmall:
                    refused[name] = 1
            if refused["plain"]:
                continue  # an instance the masks reject (a validation error): skip it
            instances += 1
            for name in order:
                times[name] += steps[name]
                if name in refusals:
                    refusals[name] += refused[name]
    stats = {name: summary(samples) for name, samples in times.items()}
    return {"paths": stats, "refusals": refusals, "instances": instances,
            "budget": args.budget, "slack": args.slack,
            "ratios": {name: stats[name]["mean_us"] / stats["plain"]["mean_us"]
                       for name in refusals}}


def report(result: dict[str, Any], title: str = "") -> None:
    stats, refusals = result["paths"], result["refusals"]
    print(f"{title}{result['instances']} valid instances, {stats['plain']['n']} steps per path")
    for name, label in (("plain", "plain        "), ("mask", "mask path    "),
                        ("decision", "decision path")):
        s = stats[name]
        ratio = s["mean_us"] / stats["plain"]["mean_us"]
        print(f"TBM {label} mean {s['mean_us']:8.1f} us  p50 {s['median_us']:7.1f}  "
              f"p99 {s['p99_us']:9.1f}  x{ratio:.3f}"
              + (f"  refused {refusals[name]}" if name in refusals else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--slack", type=int, default=0)
    parser.add_argument("--base", help="a git revision to measure at the same time")
    parser.add_argument("--worker", nargs=2, metavar=("SRC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        import_from(args.worker[0])
        Path(args.worker[1]).write_text(json.dumps(measure(args)))
        return
    if args.base:
        options = ["--sample", str(args.sample), "--seed", str(args.seed),
                   "--budget", str(args.budget), "--slack", str(args.slack)]

        def show(base_core: int, new_core: int, base: dict, new: dict) -> None:
            report(base, f"revision {args.base} on core {base_core}: ")
            report(new, f"working tree on core {new_core}: ")

        side_by_side(__file__, options, args.base, ["--sample", "5"], show)
        return
    from _common import save

    result = measure(args)
    report(result)
    save("budget_cost", result)


if __name__ == "__main__":
    main()
