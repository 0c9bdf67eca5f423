"""Valid output from the defaults: function-call arguments for the 200 Glaive schemas.

For each schema of ``/work/shared/data/glaive`` the embedded SmolLM2 model is asked
"Call the function `NAME` with realistic arguments. Reply with the JSON arguments only."
(chat template, 256-token budget) and the output is validated with the ``jsonschema``
package: tether with its default settings (temperature 0.7, seeded) and at
temperature 0, and, on the same prompts in the same run, llama.cpp's own JSON-Schema
grammar (llama-cpp-python's converter, greedy). Reports valid counts, why runs stopped,
tokens/s, and the schemas no engine can satisfy (``jsonschema`` accepts no instance:
tether proves them unsatisfiable at compile time).

    taskset -c 1 .venv/bin/python bench/glaive_generate.py [--limit N] [--no-llama-grammar]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time

from _common import save
from _glaive import PROMPT, files, function_name, valid

os.environ.setdefault("TETHER_THREADS", "1")


import tether  # noqa: E402

MAX_TOKENS = 256


def run_tether(prompt: str, schema: object, temperature: float | None, seed: int) -> dict:
    try:
        r = tether.generate(prompt, tether.JsonSchema(schema), max_tokens=MAX_TOKENS,
                            seed=seed, temperature=temperature)
    except tether.TetherError as e:
        return {"valid": False, "stop": f"error: {type(e).__name__}", "error": str(e)}
    return {"valid": valid(r.text, schema), "stop": r.stop_reason, "text": r.text,
            "tokens": len(r.tokens), "tps": r.tokens_per_s, "forced": r.n_forced}


def run_llama_grammar(model: object, prompt: str, schema: object) -> dict:
    from llama_cpp.llama_grammar import LlamaGrammar

    try:
        grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    except Exception as e:  # the converter's own failures: counted, not fatal
        return {"valid": False, "stop": "error: converter", "error": str(e)}
    ids = model.chat_prompt(prompt)
    started = time.perf_counter()
    out = model.llama.create_completion(ids, grammar=grammar, temperature=0.0,
                                        max_tokens=MAX_TOKENS)
    seconds = time.perf_counter() - started
    text = out["choices"][0]["text"]
    n = out["usage"]["completion_tokens"]
    return {"valid": valid(text, schema), "stop": out["choices"][0]["finish_reason"],
            "text": text, "tokens": n, "tps": n / seconds if seconds else 0.0}


def summary(name: str, rows: list[dict]) -> dict:
    stops = collections.Counter(r["stop"] for r in rows)
    tps = [r["tps"] for r in rows if r.get("tps")]
    out = {"engine": name, "valid": sum(r["valid"] for r in rows), "n": len(rows),
           "stops": dict(stops), "tokens_per_s_median": statistics.median(tps) if tps else 0}
    print(f"{name:28s} valid {out['valid']:4d} / {out['n']}  "
          f"tokens/s median {out['tokens_per_s_median']:.1f}  stops {dict(stops)}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N schemas only")
    parser.add_argument("--no-llama-grammar", action="store_true")
    args = parser.parse_args()
    model = tether.runtime.load_model()
    engines: dict[str, list[dict]] = collections.defaultdict(list)
    unsatisfiable = []
    paths = files(args.limit)
    for i, path in enumerate(paths):
        schema = json.loads(path.read_text())
        name = function_name(path)
        prompt = PROMPT.format(name=name)
        results = {"tether default": run_tether(prompt, schema, None, seed=i),
                   "tether temperature 0": run_tether(prompt, schema, 0.0, seed=i)}
        if not args.no_llama_grammar:
            results["llama.cpp grammar, greedy"] = run_llama_grammar(model, prompt, schema)
        if "unsatisfiable" in results["tether default"].get("error", ""):
            unsatisfiable.append(path.name)
        for engine, row in results.items():
            engines[engine].append({"schema": path.name, **row})
        marks = " ".join(f"{'ok' if r['valid'] else 'NO'}:{r['stop']}" for r in results.values())
        print(f"[{i + 1}/{len(paths)}] {path.name}: {marks}", file=sys.stderr, flush=True)
    print(f"\n{len(paths)} schemas, {MAX_TOKENS}-token budget; unsatisfiable (no engine can "
          f"be valid): {len(unsatisfiable)} {unsatisfiable}")
    summaries = [summary(engine, rows) for engine, rows in engines.items()]
    save("glaive_generate", {"summaries": summaries, "unsatisfiable": unsatisfiable,
                             "runs": dict(engines)})


if __name__ == "__main__":
    main()
