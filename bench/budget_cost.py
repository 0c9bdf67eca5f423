"""What budget-aware masks cost: MaskBench walks with and without a budget.

For a seeded sample of MaskBench schemas (SmolLM2 tokenizer) each valid instance is
walked token by token twice through a :class:`~tether.session.Session`, each time on a
fresh compile (cold caches alike): without a budget (``Session.mask()`` and
``Session.advance``: the MaskBench work per token, as a runtime does it) and with one
(the same, and the check a decision makes on the token it takes: ``completes_after`` it
in the tokens left). The budget is ``--budget`` (256,
generate's default) or the instance's own length if longer; ``--budget 0`` makes it the
instance's length (``--slack`` more) so that the budget bites over the last tokens of
every instance (the worst case).
Reports TBM mean/p50/p99 of both and their ratio, and *refusals*: tokens of a valid
instance the budget mask took out although the instance fits the budget (must be 0).

    taskset -c 1 .venv/bin/python bench/budget_cost.py [--sample 200 --seed 0]
                                                        [--budget 256] [--slack 0]
"""

from __future__ import annotations

import argparse
import json
import time

from _common import load, save, summary
from _maskbench_method import schema_files, serialise

import tether
import tether.compiler
from tether.engine import bitmask
from tether.session import Session


def walk(compiled: tether.Compiled, tokens: list[int], budget: int | None,
         times: list[float]) -> int:
    """Walk ``tokens`` through a session (with ``budget``, or none); append each step's
    time; return the tokens the masks refused."""
    matcher = compiled.matcher()
    session = Session(compiled.vocab, matcher, max_tokens=budget)
    refused = 0
    for token in tokens:
        started = time.perf_counter()
        words = session.mask()
        fits = bitmask.is_allowed(words, token)
        legal = fits or bitmask.is_allowed(matcher.mask(), token)
        if legal:
            if budget is not None:  # the check a decision makes on the token it takes
                matcher.completes_after(token, session.tokens_left - 1)
            session.advance(token)
        times.append(time.perf_counter() - started)
        if not fits:
            refused += 1
            if not legal:
                break  # the instance itself is rejected: nothing to compare after it
    return refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--slack", type=int, default=0)
    args = parser.parse_args()
    tok = load("smollm2")
    plain: list[float] = []
    budgeted: list[float] = []
    refusals = instances = 0
    for path in schema_files(args.sample, args.seed):
        data = json.loads(path.read_text())
        walks = [tok.encode(serialise(t["data"])) for t in data.get("tests", []) if t["valid"]]
        if not walks:
            continue
        try:
            tether.compiler.clear_cache()
            first = tether.compile(tether.JsonSchema(data["schema"]), tok.tether_vocab)
            tether.compiler.clear_cache()
            second = tether.compile(tether.JsonSchema(data["schema"]), tok.tether_vocab)
        except tether.CompileError:
            continue
        for tokens in walks:
            if walk(first, tokens, None, plain):
                continue  # an instance the masks reject (a validation error): skip it
            instances += 1
            try:
                budget = max(args.budget, len(tokens) + args.slack)
                refusals += walk(second, tokens, budget, budgeted)
            except tether.errors.BudgetTooSmall:
                refusals += 1
    a, b = summary(plain), summary(budgeted)
    ratio = b["mean_us"] / a["mean_us"]
    print(f"{instances} valid instances, {a['n']} / {b['n']} masks")
    print(f"TBM plain    mean {a['mean_us']:8.1f} us  p50 {a['median_us']:7.1f}  "
          f"p99 {a['p99_us']:9.1f}")
    print(f"TBM budgeted mean {b['mean_us']:8.1f} us  p50 {b['median_us']:7.1f}  "
          f"p99 {b['p99_us']:9.1f}")
    print(f"ratio of means x{ratio:.3f}; tokens of valid instances refused by the budget: "
          f"{refusals}")
    save("budget_cost", {"plain": a, "budgeted": b, "ratio": ratio, "refusals": refusals,
                         "instances": instances, "budget": args.budget, "slack": args.slack})


if __name__ == "__main__":
    main()
