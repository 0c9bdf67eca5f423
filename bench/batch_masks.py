"""Masks for a batch of sequences per step, as a server computes them: tether's
``fill_masks`` vs llguidance's ``fill_next_token_bitmask_par``.

The batch: ``--batch`` (64) MaskBench schemas that both engines compile (a seeded
sample), each with the tokens of its first valid instance (SmolLM2's tokenizer). Every
sequence is walked to the middle of its instance computing a mask before each token, as
generation does; then, step by step over the second half, the batch's masks are filled
into one preallocated array (timed, nothing else) and each sequence consumes its next
token. Each engine compiles and walks its own fresh matchers; tether's compile cache is
cleared first (what it shares per vocabulary stays warm, as in a server; what start-up
loaded is frozen out of the garbage collector's reach, as `tether serve` and vLLM do,
so its full passes scan what the batch compiled). Masks per
second = sequences × steps / time in the fill calls; per-step fill time p50/p99.

    taskset -c 0,1 .venv/bin/python bench/batch_masks.py --threads 2
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time

import numpy as np
from _common import load, save, summary
from _maskbench_method import schema_files, serialise

import tether
import tether.compiler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import llguidance
    import llguidance.numpy

    tk = load("smollm2")
    gc.collect()
    gc.freeze()  # what start-up loads, out of the collector's reach: as servers do
    cases = _cases(tk, args.batch, args.seed)
    steps = int(np.median([len(tokens) for _, tokens in cases])) // 2
    print(f"{len(cases)} schemas, {steps} timed steps from the middle of each instance "
          f"(a sequence whose instance ends leaves the batch), {args.threads} threads")

    # tether
    tether.compiler.clear_cache()
    matchers = [tether.compile(tether.JsonSchema(schema), tk.tether_vocab).matcher()
                for schema, _ in cases]
    out = np.zeros((len(cases), tether.engine.bitmask.n_words(tk.tether_vocab.size)),
                   dtype=np.uint32)
    tether_times = _run(cases, steps, lambda live: tether.fill_masks(
                            [m if k in live else None for k, m in enumerate(matchers)],
                            out, threads=args.threads),
                        lambda i, t: matchers[i].consume(t), lambda i: matchers[i].mask())

    # llguidance
    executor = llguidance.LLExecutor(num_threads=args.threads)
    ll = [llguidance.LLMatcher(tk.ll_tokenizer,
                               llguidance.LLMatcher.grammar_from_json_schema(schema),
                               log_level=0) for schema, _ in cases]
    ll_out = llguidance.numpy.allocate_token_bitmask(len(cases), tk.ll_tokenizer.vocab_size)
    row = ll_out[:1].copy()

    def ll_single(i: int) -> None:
        llguidance.numpy.fill_next_token_bitmask(ll[i], row, 0)

    ll_times = _run(cases, steps, lambda live: llguidance.numpy.fill_next_token_bitmask_par(
                        executor, [(ll[k], k) for k in live], ll_out),
                    lambda i, t: _ll_consume(ll[i], t), ll_single)

    report = {"batch": len(cases), "steps": steps, "threads": args.threads}
    for name, (times, masks) in (("tether", tether_times), ("llguidance", ll_times)):
        rate = masks / sum(times)
        s = summary(times)
        report[name] = {"masks_per_s": rate, "fill": s}
        print(f"{name:>10}: {rate:,.0f} masks/s; one batch's fill p50 "
              f"{s['median_us']:.0f} us, mean {s['mean_us']:.0f} us, p99 {s['p99_us']:.0f} us")
    ratio = report["tether"]["masks_per_s"] / report["llguidance"]["masks_per_s"]
    print(f"tether / llguidance masks per second: {ratio:.2f}")
    print(f"saved {save(f'batch_masks_{args.threads}', report)}")


def _cases(tk, n: int, seed: int) -> list[tuple[object, list[int]]]:
    """``n`` schemas both engines compile, each with its first valid instance's tokens
    (at least 8)."""
    import llguidance

    files = schema_files()
    random.Random(seed).shuffle(files)
    cases = []
    for path in files:
        case = json.loads(path.read_text())
        valid = [t for t in case["tests"] if t["valid"]]
        if not valid:
            continue
        tokens = tk.encode(serialise(valid[0]["data"]))
        if len(tokens) < 8:
            continue
        try:
            tether.compile(tether.JsonSchema(case["schema"]), tk.tether_vocab)
            grammar = llguidance.LLMatcher.grammar_from_json_schema(case["schema"])
            if llguidance.LLMatcher(tk.ll_tokenizer, grammar, log_level=0).is_error():
                continue
        except Exception:  # noqa: BLE001 - either engine refuses it: not in the batch
            continue
        cases.append((case["schema"], tokens))
        if len(cases) == n:
            break
    return cases


def _run(cases, steps: int, fill, consume, single) -> tuple[list[float], int]:
    """Walk to the middle (a mask per token, one sequence at a time), then time the
    fill of the sequences still going (``fill(live)``, their indices) at each of
    ``steps`` steps: the times and the masks filled."""
    for i, (_, tokens) in enumerate(cases):
        for t in tokens[:len(tokens) // 2]:
            single(i)
            consume(i, t)
    times, masks = [], 0
    for step in range(steps):
        live = [i for i, (_, tokens) in enumerate(cases)
                if len(tokens) // 2 + step < len(tokens)]
        if not live:
            break
        started = time.perf_counter()
        fill(live)
        times.append(time.perf_counter() - started)
        masks += len(live)
        for i in live:
            tokens = cases[i][1]
            consume(i, tokens[len(tokens) // 2 + step])
    return times, masks


def _ll_consume(matcher, token: int) -> None:
    if not matcher.consume_token(token):
        raise SystemExit(f"llguidance refused a valid token: {matcher.get_error()}")


if __name__ == "__main__":
    main()
