"""tether inside vLLM against vLLM's own structured-output backends, on Glaive schemas.

The first 50 function-call schemas of ``/work/shared/data/glaive`` (sorted by file name),
the embedded SmolLM2 dequantised (:mod:`tether.runtime.hf_export`) and run by vLLM on the
CPU (``dtype=float32``, eager, ``VLLM_CPU_KVCACHE_SPACE=2``), the same chat prompts as
``glaive_generate.py``, greedy, 256-token budget, at most 8 requests in the batch
(``max_num_seqs=8``, all 50 submitted at once). Engines, one vLLM instance each, each in
its own subprocess of this run: tether's logits processor
(``tether.integrations.vllm:TetherLogitsProcessor``, spec in ``extra_args``), vLLM's
``guidance`` backend and its ``xgrammar`` backend (``StructuredOutputsParams(json=...)``).
Prints valid outputs (``jsonschema``), generated tokens/s (all output tokens over the
wall time of ``generate``, compilation included; model loading excluded) and wall time;
saves ``bench/results/vllm_glaive.json``. Needs ``.venv-vllm`` (``make vllm-env``)::

    taskset -c 1 .venv-vllm/bin/python bench/vllm_glaive.py [--limit 50] [--engines ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import save
from _glaive import PROMPT, schemas, valid

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

MAX_TOKENS = 256
BATCH = 8
ENGINES = ("tether", "guidance", "xgrammar")
PROCESSOR = "tether.integrations.vllm:TetherLogitsProcessor"


def run_engine(engine: str, limit: int) -> dict:
    """Load one vLLM instance for ``engine`` and generate for every schema."""
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from tether.integrations.vllm import TetherLogitsProcessor
    from tether.runtime.hf_export import export_embedded

    folder = str(export_embedded())
    options: dict = {"logits_processors": [PROCESSOR]} if engine == "tether" else {
        "structured_outputs_config": {"backend": engine}}
    started = time.perf_counter()
    llm = LLM(model=folder, dtype="float32", max_model_len=2048, enforce_eager=True,
              max_num_seqs=BATCH, seed=0, **options)
    load_s = time.perf_counter() - started
    tokenizer = llm.get_tokenizer()
    items = schemas(limit)
    prompts = [tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT.format(name=name)}],
        tokenize=False, add_generation_prompt=True) for name, _ in items]
    params = []
    for _, schema in items:
        if engine == "tether":
            extra = {"extra_args": {"tether": {"json_schema": schema}}}
        else:
            extra = {"structured_outputs": StructuredOutputsParams(json=schema)}
        params.append(SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, **extra))
    # A request its engine refuses at admission (guidance: "Unimplemented keys") would fail
    # the whole generate call: check each first, as the engine will, and count it invalid.
    config = llm.llm_engine.vllm_config
    refused: dict[int, str] = {}
    for i, p in enumerate(params):
        try:
            copy.deepcopy(p).verify(config.model_config, config.speculative_config,
                                    config.structured_outputs_config, tokenizer)
            if engine == "tether":
                TetherLogitsProcessor.validate_params(p)
        except Exception as e:  # whatever the engine refuses
            refused[i] = f"refused: {str(e)[:120]}"
    keep = [i for i in range(len(items)) if i not in refused]
    started = time.perf_counter()
    outputs = dict(zip(keep, llm.generate([prompts[i] for i in keep],
                                          [params[i] for i in keep], use_tqdm=False),
                       strict=True))
    wall = time.perf_counter() - started
    rows = []
    for i, (name, schema) in enumerate(items):
        if i in refused:
            rows.append({"schema": name, "text": "", "tokens": 0, "finish": refused[i],
                         "valid": False})
            continue
        out = outputs[i].outputs[0]
        rows.append({"schema": name, "text": out.text, "tokens": len(out.token_ids),
                     "finish": out.finish_reason, "valid": valid(out.text, schema)})
    tokens = sum(r["tokens"] for r in rows)
    return {"engine": engine, "n": len(rows), "valid": sum(r["valid"] for r in rows),
            "refused": len(refused),
            "tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall,
            "load_s": load_s, "runs": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=50, help="the first N schemas")
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)  # child run
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:  # a child: one engine, its result as JSON in --out
        Path(args.out).write_text(json.dumps(run_engine(args.engine, args.limit)))
        return
    results = []
    for engine in args.engines:  # each in a fresh process: vLLM holds its engine to exit
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            subprocess.run([sys.executable, __file__, "--engine", engine, "--limit",
                            str(args.limit), "--out", out.name], check=True)
            results.append(json.loads(Path(out.name).read_text()))
        r = results[-1]
        print(f"[{engine}] valid {r['valid']}/{r['n']}, {r['tokens_per_s']:.1f} tokens/s",
              file=sys.stderr, flush=True)
    print(f"\n{args.limit} Glaive schemas, greedy, batch {BATCH}, {MAX_TOKENS}-token budget, "
          "vLLM CPU, SmolLM2-135M float32")
    print(f"{'engine':10s} {'valid':>8s} {'refused':>7s} {'tokens':>7s} {'tokens/s':>9s} "
          f"{'wall s':>7s} {'load s':>7s}")
    for r in results:
        valid_of = f"{r['valid']}/{r['n']}"
        print(f"{r['engine']:10s} {valid_of:>8s} {r['refused']:>7d} "
              f"{r['tokens']:>7d} {r['tokens_per_s']:>9.1f} {r['wall_s']:>7.1f} "
              f"{r['load_s']:>7.1f}")
    by = {r["engine"]: r for r in results}
    if "tether" in by and len(by) > 1:
        best = max((r for e, r in by.items() if e != "tether"),
                   key=lambda r: r["tokens_per_s"])
        print(f"tether / fastest backend ({best['engine']}) tokens/s: "
              f"{by['tether']['tokens_per_s'] / best['tokens_per_s']:.2f}")
    save("vllm_glaive", {"limit": args.limit, "batch": BATCH, "max_tokens": MAX_TOKENS,
                         "results": results})


if __name__ == "__main__":
    main()
