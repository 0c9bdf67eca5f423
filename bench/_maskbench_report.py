"""MaskBench figures from per-schema results: the per-engine summary, the printed table,
the per-schema differences between engines, and the JSON-lines record of one result.

A result is what :func:`_maskbench_method.run_schema` returns (or the pool's timeout /
crash record): ``status``, ``ttfm_s``, ``tbm_s`` and the tests answered wrongly.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from _maskbench_method import COMPILE_ERROR, CRASH, EXCEPTION, PASS, TIMEOUT

TOP_KEYWORDS = 12


def record(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON-lines form of a result: mask times reduced to count, mean and max."""
    tbm = np.asarray(result.get("tbm_s", []), dtype=float) * 1e6
    out = {k: v for k, v in result.items() if k != "tbm_s"}
    out.update(tbm_n=int(tbm.size), tbm_mean_us=_round(tbm.mean()) if tbm.size else None,
               tbm_max_us=_round(tbm.max()) if tbm.size else None)
    return out


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures of one engine's results."""
    status = Counter(r["status"] for r in results)
    keywords = Counter(r["keyword"] for r in results if r["status"] == COMPILE_ERROR)
    tbm = np.concatenate([np.asarray(r.get("tbm_s", []), dtype=float) for r in results]
                         or [np.zeros(0)]) * 1e6
    ttfm = np.asarray([r["ttfm_s"] for r in results if r.get("ttfm_s") is not None]) * 1e3
    return {
        "schemas": len(results),
        "passing": status[PASS],
        "compile_errors": status[COMPILE_ERROR],
        "compile_error_keywords": dict(keywords.most_common()),
        "timeouts": status[TIMEOUT],
        "crashes": status[CRASH],
        "exceptions": status[EXCEPTION],
        "validation_errors": _wrong(results, "validation_errors"),
        "invalidation_errors": _wrong(results, "invalidation_errors"),
        "check_problems": _wrong(results, "problems"),
        "tbm_us": _stats(tbm, (50, 90, 99)),
        "ttfm_ms": _stats(ttfm, (50, 90, 99)),
    }


def both_pass(by_engine: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """TBM and TTFM of every engine on the schemas that all engines pass (the like-for-
    like comparison: each engine's own figures cover different schema sets)."""
    passing = set.intersection(*({r["file"] for r in rs if r["status"] == PASS}
                                 for rs in by_engine.values()))
    out: dict[str, Any] = {"schemas": len(passing)}
    for engine, results in by_engine.items():
        figures = summarise([r for r in results if r["file"] in passing])
        out[engine] = {"tbm_us": figures["tbm_us"], "ttfm_ms": figures["ttfm_ms"]}
    return out


def differences(by_engine: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One line per schema that some engine passes and another does not."""
    engines = list(by_engine)
    per_file: dict[str, dict[str, dict[str, Any]]] = {}
    for engine, results in by_engine.items():
        for r in results:
            per_file.setdefault(r["file"], {})[engine] = r
    lines = []
    for name, rs in sorted(per_file.items()):
        verdicts = {rs[e]["status"] == PASS for e in engines if e in rs}
        if len(verdicts) > 1:
            lines.append(f"{name}: " + "  ".join(f"{e}={outcome(rs[e])}" for e in engines
                                                 if e in rs))
    return lines


def outcome(result: dict[str, Any]) -> str:
    """A result in a few words: ``pass``, ``compile_error(not)``, ``fail(2 valid rejected)``…"""
    status = result["status"]
    if status == COMPILE_ERROR:
        return f"compile_error({result['keyword']})"
    if status in (EXCEPTION, TIMEOUT, CRASH):
        return f"{status}({result.get('error', '')[:80]})"
    if status == PASS:
        return status
    parts = [f"{len(result[k])} {what}" for k, what in (
        ("validation_errors", "valid rejected"), ("invalidation_errors", "invalid accepted"),
        ("problems", "check problems")) if result[k]]
    return f"{status}({', '.join(parts)})"


def table(title: str, summaries: dict[str, dict[str, Any]],
          common: dict[str, Any] | None) -> str:
    """The printed report: one column per engine."""
    engines = list(summaries)
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, cell: Any) -> None:
        rows.append((label, [str(cell(summaries[e])) for e in engines]))

    row("schemas", lambda s: s["schemas"])
    row("passing", lambda s: s["passing"])
    row("compile errors", lambda s: s["compile_errors"])
    row("timeouts", lambda s: s["timeouts"])
    row("crashes", lambda s: s["crashes"])
    row("exceptions (other failures)", lambda s: s["exceptions"])
    row("validation errors: tests (schemas)", lambda s: _pair(s["validation_errors"]))
    row("invalidation errors: tests (schemas)", lambda s: _pair(s["invalidation_errors"]))
    if any(s["check_problems"]["tests"] for s in summaries.values()):
        row("check problems: tests (schemas)", lambda s: _pair(s["check_problems"]))
    row("masks measured", lambda s: s["tbm_us"]["n"])
    for key in ("mean", "p50", "p90", "p99", "max"):
        row(f"TBM {key} (us)", lambda s, key=key: _num(s["tbm_us"].get(key)))
    for key in ("p50", "p90", "p99"):
        row(f"TTFM {key} (ms)", lambda s, key=key: _num(s["ttfm_ms"].get(key)))
    width = max(len(label) for label, _ in rows)
    col = max(12, *(len(e) + 2 for e in engines))
    lines = [title, " " * width + "".join(e.rjust(col) for e in engines)]
    lines += [label.ljust(width) + "".join(c.rjust(col) for c in cells) for label, cells in rows]
    for engine in engines:
        top = list(summaries[engine]["compile_error_keywords"].items())[:TOP_KEYWORDS]
        if top:
            lines.append(f"compile errors by keyword, {engine}: "
                         + ", ".join(f"{k} {n}" for k, n in top))
    if common is not None and common["schemas"]:
        lines.append(f"on the {common['schemas']} schemas every engine passes:")
        for engine in engines:
            t, f = common[engine]["tbm_us"], common[engine]["ttfm_ms"]
            lines.append(f"  {engine}: TBM mean {_num(t.get('mean'))} p50 {_num(t.get('p50'))}"
                         f" p99 {_num(t.get('p99'))} us; TTFM p50 {_num(f.get('p50'))}"
                         f" p99 {_num(f.get('p99'))} ms")
    return "\n".join(lines)


def _wrong(results: list[dict[str, Any]], key: str) -> dict[str, int]:
    with_errors = [r for r in results if r.get(key)]
    return {"tests": sum(len(r[key]) for r in with_errors), "schemas": len(with_errors)}


def _stats(values: np.ndarray, percentiles: tuple[int, ...]) -> dict[str, float]:
    if not values.size:
        return {"n": 0}
    out = {"n": int(values.size), "mean": _round(values.mean()), "max": _round(values.max())}
    for p in percentiles:
        out[f"p{p}"] = _round(np.percentile(values, p))
    return out


def _round(x: float) -> float:
    return float(f"{float(x):.4g}")


def _pair(counts: dict[str, int]) -> str:
    return f"{counts['tests']} ({counts['schemas']})"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"
