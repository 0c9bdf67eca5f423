"""Mask time of ``tether.grammars.python()`` on real modules, and its compile time.

Compile: ``tether.compile(tether.grammars.python(), vocab)`` from an empty cache (the
Lark text parsed, layout resolved, the pushdown automaton built, the grammar's warm-up
sample walked — ``--no-warm-up``: not — and the start mask computed), then again (served
from the cache). Masks: each module of the standard library given is
tokenised with the real SmolLM2 tokenizer (llama.cpp's) and walked token by token, the
mask computed (timed) before every token and before the end; every token must be in its
mask. Each module is walked twice with a fresh compile: the first walk meets parser
configurations for the first time (cold), the second finds their masks cached (warm). A
walk stopped by a bound of the engine (:class:`~tether.errors.LimitExceeded`) is reported.

    taskset -c 1 .venv/bin/python bench/python_masks.py [--modules glob,shelve,hmac] [--no-warm-up]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import time
from pathlib import Path

from _common import save, smollm2_gguf, summary

import tether
import tether.grammars
from tether.compiler import clear_cache
from tether.engine import bitmask
from tether.errors import LimitExceeded


def walk(compiled: tether.Compiled, tokens: list[int]) -> list[float]:
    """Mask times (seconds) of one walk over ``tokens``, then end of generation."""
    matcher = compiled.matcher()
    times = []
    for token in [*tokens, None]:
        started = time.perf_counter()
        words = matcher.mask()
        times.append(time.perf_counter() - started)
        if token is None:
            if not matcher.eos_allowed():
                raise SystemExit("end of generation refused at the end of the module")
        elif not bitmask.is_allowed(words, token):
            raise SystemExit(f"token {token} refused after {matcher.generated_bytes[-80:]!r}")
        else:
            matcher.consume(token)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", default="glob,shelve,hmac",
                        help="standard-library modules to walk (comma-separated)")
    parser.add_argument("--no-warm-up", action="store_true",
                        help="compile without the grammar's warm-up sample")
    args = parser.parse_args()
    grammar = tether.grammars.python()
    if args.no_warm_up:
        grammar = dataclasses.replace(grammar, warm_up=None)
    import llama_cpp

    path = smollm2_gguf()
    vocab = tether.Vocabulary.from_file(path)
    llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)

    clear_cache()
    started = time.perf_counter()
    tether.compile(grammar, vocab)
    first = time.perf_counter() - started
    started = time.perf_counter()
    tether.compile(grammar, vocab)
    cached = time.perf_counter() - started
    print(f"compile python(): first {first * 1e3:.0f} ms, cached {cached * 1e6:.1f} us")

    report: dict = {"compile_first_s": first, "compile_cached_s": cached,
                    "warm_up": not args.no_warm_up, "modules": {}}
    cold_all, warm_all = [], []
    for name in args.modules.split(","):
        source = Path(importlib.util.find_spec(name).origin).read_bytes()
        tokens = llama.tokenize(source, add_bos=False, special=False)
        clear_cache()
        compiled = tether.compile(grammar, vocab)
        try:
            cold, warm = walk(compiled, tokens), walk(compiled, tokens)
        except LimitExceeded as error:
            print(f"{name:>12}: {error}")
            report["modules"][name] = {"bytes": len(source), "tokens": len(tokens),
                                       "error": str(error)}
            continue
        cold_all += cold
        warm_all += warm
        report["modules"][name] = {"bytes": len(source), "tokens": len(tokens),
                                   "cold": summary(cold), "warm": summary(warm)}
        for label, times in (("cold", cold), ("warm", warm)):
            s = summary(times)
            print(f"{name:>12} {label}: {len(tokens)} tokens, mean {s['mean_us']:.0f} us, "
                  f"p50 {s['median_us']:.0f} us, p99 {s['p99_us']:.0f} us, "
                  f"max {s['max_us'] / 1e3:.1f} ms")
    report["cold"], report["warm"] = summary(cold_all), summary(warm_all)
    for label in ("cold", "warm") if cold_all else ():
        s = report[label]
        print(f"{'all':>12} {label}: mean {s['mean_us']:.0f} us, p50 {s['median_us']:.0f} us, "
              f"p99 {s['p99_us']:.0f} us, max {s['max_us'] / 1e3:.1f} ms")
    print(f"saved {save('python_masks', report)}")


if __name__ == "__main__":
    main()
