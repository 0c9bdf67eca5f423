"""MaskBench: JSON Schema masks, tether vs llguidance, same schemas, same tokens.

Follows the method of ``/work/shared/data/README.md`` (see ``_maskbench_method.py``) over
the MaskBench files — all 5,647 or a seeded sample — with the SmolLM2 or DeepSeek-V4
tokenizer. Engines are single-threaded; each batch of schemas runs in a fresh worker
process with a per-schema time limit, so a hang or a crash costs one schema
(``_maskbench_pool.py``). Prints, per engine, TBM mean/p50/p90/p99/max, TTFM p50/p90/p99,
passing schemas, compile errors by keyword, timeouts, crashes, validation and
invalidation errors; ``--diff`` lists the schemas one engine passes and another fails.
Every result is also written as a JSON line (``--out``) as soon as it is known.

``--check-only`` runs tether alone, without timing, as a correctness driver: besides the
method it checks ``Compiled.check`` on each instance, ``allowed()`` against the mask and
that no prefix is a dead end; it prints every wrong answer and exits 1 if there is one.

    taskset -c 1 .venv/bin/python bench/maskbench.py [--tokenizer smollm2|deepseek]
        [--engines tether,llguidance] [--sample 400 --seed 0] [--timeout 60] [--diff]
"""

from __future__ import annotations

import os

# Single-threaded engines; set before numpy / numba / tokenizers are imported.
for _name in ("RAYON_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from _common import RESULTS, Tokenizers, load, save  # noqa: E402
from _maskbench_keywords import llguidance_keyword  # noqa: E402
from _maskbench_method import (  # noqa: E402
    COMPILE_ERROR,
    PASS,
    Engine,
    TetherEngine,
    run_schema,
    schema_files,
)
from _maskbench_pool import run_items  # noqa: E402
from _maskbench_report import both_pass, differences, outcome, record, summarise, table  # noqa: E402,E501

ENGINES = ("tether", "llguidance")
WARM_UP_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                                   "n": {"type": "integer"}}}
WARM_UP_TEXT = '{"name": "x", "n": 1}'


class LLGuidanceRefusal(Exception):
    """llguidance put its matcher in an error state while building the grammar."""


class LLGuidanceEngine:
    """llguidance (PyPI): ``grammar_from_json_schema`` with its default options, one
    ``LLMatcher`` per walk, masks filled into a reused numpy row."""

    name = "llguidance"

    def __init__(self, tokenizers: Tokenizers) -> None:
        from llguidance.numpy import allocate_token_bitmask

        self.tokenizer = tokenizers.ll_tokenizer
        size = max(tokenizers.tether_vocab.size, self.tokenizer.vocab_size)
        self.out = allocate_token_bitmask(1, size)

    def forget(self) -> None:
        pass  # the method's walkers and compiled grammars are gone with their schema

    def compile(self, schema: Any) -> _LLGuidanceCompiled:
        import llguidance

        grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)
        matcher = llguidance.LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise LLGuidanceRefusal(matcher.get_error())
        return _LLGuidanceCompiled(grammar, matcher)

    def start(self, compiled: _LLGuidanceCompiled) -> _LLGuidanceWalker:
        import llguidance

        matcher, compiled.unused = compiled.unused, None
        if matcher is None:
            matcher = llguidance.LLMatcher(self.tokenizer, compiled.grammar, log_level=0)
        return _LLGuidanceWalker(matcher, self.out)

    def refusal(self, error: Exception) -> str | None:
        if isinstance(error, LLGuidanceRefusal | ValueError):
            return llguidance_keyword(str(error))
        return None


@dataclass
class _LLGuidanceCompiled:
    """The grammar, and the matcher built to validate it until the first walk takes it."""

    grammar: str
    unused: Any


class _LLGuidanceWalker:
    """Masks written straight into the row's memory (what a serving loop does), so the
    time measured is llguidance's and not Python's argument checks."""

    def __init__(self, matcher: Any, out: np.ndarray) -> None:
        self.matcher, self.row = matcher, out[0].view(np.uint32)
        self.pointer, self.n_bytes = self.row.ctypes.data, self.row.nbytes

    def mask(self) -> np.ndarray:
        self.matcher.unsafe_compute_mask_ptr(self.pointer, self.n_bytes)
        return self.row

    def consume(self, token_id: int) -> None:
        if not self.matcher.consume_token(token_id):
            raise RuntimeError(f"llguidance: {self.matcher.get_error()}")

    def eos_allowed(self) -> bool:
        return self.matcher.is_accepting()


def main() -> None:
    args = _arguments()
    tokenizers = load(args.tokenizer)
    engines = _engines(args, tokenizers)
    files = schema_files(args.sample, args.seed, args.match)
    if not files:
        raise SystemExit("no MaskBench file found (set TETHER_MASKBENCH_DIR?)")
    if not args.check_only and len(os.sched_getaffinity(0)) > 1:
        print("note: not pinned to one core; for timings run with `taskset -c 1`",
              file=sys.stderr)
    for engine in engines.values():
        _warm_up(engine, tokenizers)
    gc.collect()
    gc.freeze()  # the workers inherit the loaded state; their collections skip it
    by_engine = _run(args, files, engines, tokenizers)
    _report(args, len(files), tokenizers.tether_vocab.size, by_engine)
    if args.check_only and any(r["status"] not in (PASS, COMPILE_ERROR)
                               for r in by_engine["tether"]):
        raise SystemExit(1)


def _run(args: argparse.Namespace, files: list[Path], engines: dict[str, Engine],
         tokenizers: Tokenizers) -> dict[str, list[dict[str, Any]]]:
    """Every (schema, engine) in worker processes; results as JSON lines and progress
    lines as they come; the results by engine."""
    token_bytes = tokenizers.tether_vocab.token_bytes

    def work(item: tuple[Path, str]) -> dict[str, Any]:
        path, engine = item
        return run_schema(engines[engine], path, tokenizers.encode, token_bytes,
                          check=args.check_only)

    def failure(item: tuple[Path, str], status: str, detail: str) -> dict[str, Any]:
        tests = len(json.loads(item[0].read_text())["tests"])
        return {"file": item[0].name, "engine": item[1], "status": status, "keyword": None,
                "error": detail, "ttfm_s": None, "tests": tests, "validation_errors": [],
                "invalidation_errors": [], "problems": []}

    items = [(path, engine) for path in files for engine in engines]
    by_engine: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    out = Path(args.out or RESULTS / f"{_name(args)}.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"per-schema results: {out}", file=sys.stderr)
    started = time.monotonic()
    with out.open("w") as sink:
        row: list[dict[str, Any]] = []
        for result in run_items(items, work, failure, batch=args.batch * len(engines),
                                timeout=args.timeout, memory_gb=args.memory_gb):
            by_engine[result["engine"]].append(result)
            sink.write(json.dumps(record(result), ensure_ascii=False) + "\n")
            sink.flush()
            row.append(result)
            if len(row) == len(engines):
                print(f"[{len(by_engine[result['engine']])}/{len(files)} "
                      f"{time.monotonic() - started:.0f}s] {result['file']}  "
                      + "  ".join(f"{r['engine']}={outcome(r)}" for r in row),
                      file=sys.stderr)
                row = []
    return by_engine


def _report(args: argparse.Namespace, n_files: int, vocab_size: int,
            by_engine: dict[str, list[dict[str, Any]]]) -> None:
    summaries = {e: summarise(rs) for e, rs in by_engine.items()}
    sample = f"sample of {args.sample}, seed {args.seed}" if args.sample else "all files"
    tests = sum(r["tests"] for r in next(iter(by_engine.values())))
    title = (f"MaskBench, {args.tokenizer} tokenizer (V={vocab_size}), {n_files} schemas "
             f"({sample}), {tests} tests{', check only' if args.check_only else ''}")
    common = both_pass(by_engine) if len(by_engine) > 1 else None
    print(table(title, summaries, common))
    if args.diff and len(by_engine) > 1:
        print("\nschemas passed by one engine and not the other:")
        print("\n".join(differences(by_engine)) or "(none)")
    if args.check_only:
        _print_wrong(by_engine["tether"])
    path = save(_name(args), {"arguments": vars(args), "summaries": summaries,
                              "both_pass": common, "versions": _versions()})
    print(f"summary: {path}")


def _name(args: argparse.Namespace) -> str:
    return f"maskbench{'_check' if args.check_only else ''}_{args.tokenizer}"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", choices=("smollm2", "deepseek"), default="smollm2")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help="comma-separated, from: " + ", ".join(ENGINES))
    parser.add_argument("--sample", type=int, help="a seeded random sample of N schemas")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--match", default="", help="only files whose name contains this")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds per schema and engine (default 60)")
    parser.add_argument("--batch", type=int, default=20, help="schemas per worker process")
    parser.add_argument("--memory-gb", type=float, default=8.0,
                        help="memory a worker may allocate beyond what it inherits")
    parser.add_argument("--out", help="JSON-lines file of per-schema results "
                        "(default bench/results/maskbench_<tokenizer>.jsonl)")
    parser.add_argument("--diff", action="store_true",
                        help="list the schemas one engine passes and another does not")
    parser.add_argument("--check-only", action="store_true",
                        help="tether alone, no timing, extra correctness checks")
    return parser.parse_args()


def _engines(args: argparse.Namespace, tokenizers: Tokenizers) -> dict[str, Engine]:
    names = ["tether"] if args.check_only else [e for e in args.engines.split(",") if e]
    unknown = set(names) - set(ENGINES)
    if unknown or not names:
        raise SystemExit(f"--engines: choose from {', '.join(ENGINES)}")
    build = {"tether": lambda: TetherEngine(tokenizers.tether_vocab),
             "llguidance": lambda: LLGuidanceEngine(tokenizers)}
    return {name: build[name]() for name in names}


def _warm_up(engine: Engine, tokenizers: Tokenizers) -> None:
    """Load what every schema uses (JIT-compiled kernels, tries) before the workers fork,
    so it does not land in the first schema's time to first mask."""
    if isinstance(engine, TetherEngine):
        tokenizers.tether_vocab.trie  # noqa: B018 - built once per vocabulary
    try:
        walker = engine.start(engine.compile(WARM_UP_SCHEMA))
        for token in tokenizers.encode(WARM_UP_TEXT):
            walker.mask()
            walker.consume(token)
    except Exception as e:  # noqa: BLE001 - the run itself reports what fails
        print(f"note: {engine.name} warm-up failed: {type(e).__name__}: {e}", file=sys.stderr)


def _print_wrong(results: list[dict[str, Any]]) -> None:
    wrong = [r for r in results if r["status"] not in (PASS, COMPILE_ERROR)]
    print(f"\n{len(wrong)} schemas answered wrongly or failed:")
    for r in wrong:
        print(f"{r['file']}: {outcome(r)}")
        for e in r["validation_errors"]:
            print(f"  test {e['test']}: valid instance rejected at token {e['step']}/{e['of']}"
                  f" {e['rejected']!r} after ...{e['after']!r}")
        for e in r["invalidation_errors"]:
            print(f"  test {e['test']}: invalid instance accepted: {e['text']!r}")
        for e in r["problems"]:
            print(f"  test {e['test']}: {e['problem']}")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("tether", "llguidance"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out


if __name__ == "__main__":
    main()
