"""End-to-end tokens/s with the embedded SmolLM2 model: constrained vs unconstrained.

The same generation loop (``tether.generate``) runs each prompt with its constraint and
without one, alternating, on llama.cpp with 1 thread; tokens/s counts every generated
token (forced ones included) over the decoding time. The unconstrained run is capped at
the same number of tokens as the constrained one produced, so both decode equally long
sequences from the same prompt.

    taskset -c 1 .venv/bin/python bench/e2e_tokens.py [--repeats 5]

``--glaive N`` runs the first N function-call schemas of ``/work/shared/data/glaive``
instead (default settings, 256-token budget, one run each): the prompt of
``bench/glaive_generate.py``, constrained by the schema, then unconstrained for as many
tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from _common import save

os.environ.setdefault("TETHER_THREADS", "1")

import tether  # noqa: E402

CASES = [
    ("When did the Apollo 11 landing happen? Answer with a date.",
     tether.Regex(r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])")),
    ("Write the e-mail address of a fictional support team.",
     tether.Regex(r"[a-z]{3,12}\.[a-z]{3,12}@[a-z]{3,10}\.(com|org|net)")),
    ("Describe the weather today in one sentence.",
     tether.Regex(r"[A-Z][a-z ,']{20,120}\.")),
    ("Give a JSON object with a name and an age.",
     tether.Regex(r'\{"name": "[A-Z][a-z]{1,12}", "age": [1-9][0-9]?\}')),
    ("Is Paris the capital of France?", tether.Choices(["yes", "no"])),
    ("Give a US phone number.", tether.Regex(r"\(\d{3}\) \d{3}-\d{4}")),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--glaive", type=int, default=0, metavar="N",
                        help="the first N function-call schemas instead of the cases")
    args = parser.parse_args()
    tether.generate("Hello", None, max_tokens=8, seed=0)  # load and warm the model
    rows = []
    ratios = []
    cases = CASES
    if args.glaive:
        folder = Path(__file__).resolve().parents[2] / "shared" / "data" / "glaive"
        prompt = ("Call the function `{}` with realistic arguments. "
                  "Reply with the JSON arguments only.")
        cases = [(prompt.format(p.stem.rsplit("_", 1)[0]),
                  tether.JsonSchema(json.loads(p.read_text())))
                 for p in sorted(folder.glob("*.json"))[: args.glaive]]
        args.repeats, args.max_tokens = 1, 256
    for prompt, constraint in cases:
        ours, free, forced = [], [], []
        for r in range(args.repeats):
            try:
                con = tether.generate(prompt, constraint, max_tokens=args.max_tokens, seed=r)
            except tether.CompileError:  # an unsatisfiable schema
                break
            n = max(len(con.tokens), 8)
            unc = tether.generate(prompt, None, max_tokens=n, seed=r)
            ours.append(con.tokens_per_s)
            free.append(unc.tokens_per_s)
            forced.append(con.n_forced / max(1, len(con.tokens)))
        if not ours:
            continue
        row = {"prompt": prompt, "constraint": repr(constraint),
               "constrained_tps": statistics.median(ours),
               "unconstrained_tps": statistics.median(free),
               "forced_fraction": statistics.fmean(forced),
               "example": con.text}
        row["ratio"] = row["constrained_tps"] / row["unconstrained_tps"]
        if len(con.tokens) >= 5:  # a run of 1-2 tokens has no meaningful rate
            ratios.append(row["ratio"])
        rows.append(row)
        print(f"{row['constrained_tps']:6.1f} vs {row['unconstrained_tps']:6.1f} tokens/s "
              f"(x{row['ratio']:.2f}, {100 * row['forced_fraction']:.0f}% forced)  "
              f"{constraint!r:.60} -> {con.text!r}", flush=True)
    total = {"median_ratio": statistics.median(ratios), "min_ratio": min(ratios),
             "mean_constrained_tps": statistics.fmean(r["constrained_tps"] for r in rows),
             "mean_unconstrained_tps": statistics.fmean(r["unconstrained_tps"] for r in rows),
             "rows": rows}
    print(f"constrained / unconstrained tokens/s over runs of >= 5 tokens: median "
          f"x{total['median_ratio']:.2f}, min x{total['min_ratio']:.2f}; means "
          f"{total['mean_constrained_tps']:.1f} vs {total['mean_unconstrained_tps']:.1f}")
    save("e2e_glaive" if args.glaive else "e2e_tokens", total)


if __name__ == "__main__":
    main()
