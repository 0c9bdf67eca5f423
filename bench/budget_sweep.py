"""Budgets never cut a constrained run: 200 random budgets per constraint.

For every regex of ``tests/regex_corpus.py``, every grammar of ``tests/grammars``, the
schemas of ``tests/test_budget.py`` and every 10th function-call schema of
``/work/shared/data/glaive``, each compiled as ``generate()`` compiles it (the generation
policy), sessions driven by random
logits that favour long tokens run with the shortest budget and budgets drawn between it
and three times it (SmolLM2 vocabulary). Counts runs that ended accepted (must be all),
by the budget (must be none) and with a text the constraint rejects (must be none).

    taskset -c 1 .venv/bin/python bench/budget_sweep.py [--budgets 200]
"""

from __future__ import annotations

import argparse
import collections
import json
import time

from _common import ROOT, save, smollm2_gguf
from budget_runs import budget_runs
from regex_corpus import CORPUS
from test_budget import GLAIVE, SCHEMAS

import tether
from tether.session import compile_for_generation


def constraints() -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [(f"regex {p}", tether.Regex(p)) for p, _ in CORPUS]
    for path in sorted((ROOT / "tests" / "grammars").glob("*.*")):
        if path.is_file():
            syntax = "lark" if path.suffix == ".lark" else "gbnf"
            out.append((f"grammar {path.name}", tether.Grammar(path.read_text(), syntax=syntax)))
    for schema in SCHEMAS:
        out.append((f"schema {json.dumps(schema)[:40]}", tether.JsonSchema(schema)))
    for path in sorted(GLAIVE.glob("*.json"))[::10]:
        out.append((f"glaive {path.name}", tether.JsonSchema(json.loads(path.read_text()))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, default=200)
    args = parser.parse_args()
    vocab = tether.Vocabulary.from_file(smollm2_gguf())
    totals: collections.Counter[str] = collections.Counter()
    failures = []
    started = time.perf_counter()
    for name, constraint in constraints():
        try:  # under the generation policy (JSON Schema), as generate() compiles it
            compiled = compile_for_generation(constraint, vocab)
        except tether.CompileError as e:
            print(f"skip {name}: {e}")
            continue
        for budget, session, stop in budget_runs(compiled, args.budgets):
            text = b"".join(vocab.token_bytes(t) for t in session.tokens)
            ok = stop in ("constraint_complete", "eog") and compiled.check(text).matches
            totals["runs"] += 1
            totals["accepted" if ok else "failed"] += 1
            totals[f"stop {stop}"] += 1
            if not ok:
                failures.append({"constraint": name, "budget": budget, "stop": stop,
                                 "text": text.decode("utf-8", "replace")})
        print(f"{name[:60]:60s} runs {totals['runs']:6d} failed {totals['failed']}",
              flush=True)
    seconds = time.perf_counter() - started
    print(f"\n{dict(totals)} in {seconds:.0f} s")
    save("budget_sweep", {"totals": dict(totals), "failures": failures, "seconds": seconds})


if __name__ == "__main__":
    main()
