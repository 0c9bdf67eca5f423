"""The MaskBench method (``/work/shared/data/README.md``), one schema at a time, for any
engine: shared by ``bench/maskbench.py`` and ``tests/test_maskbench.py``.

For a schema: compile it and compute the first mask (time to first mask, TTFM); then for
each test instance, serialise ``data`` with ``json.dumps(data, ensure_ascii=False)``,
tokenise it with the real tokenizer (no special tokens) and walk the tokens: compute the
mask (time between masks, TBM), check the next token is allowed, consume it; at the end
compute the last mask and check end of generation is allowed. A valid instance rejected
anywhere is a *validation error*, an invalid one accepted to the end an *invalidation
error*; a schema passes when it compiles and every test is right.

An engine is anything with :class:`Engine`'s methods; :class:`TetherEngine` is tether's.
``check=True`` (tether only, no timing) adds correctness checks beyond the method, counted
as *problems*: the text-level verdict of ``Compiled.check`` must be right wherever the
token-level one is (a wrong token-level verdict is already an error), ``allowed(t)`` must
agree with the mask, and no prefix may be a dead end (an empty mask where end of
generation is not allowed either).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from _maskbench_keywords import tether_keyword

import tether
import tether.compiler
from tether.engine import bitmask

DATA_DIR = Path(os.environ.get("TETHER_MASKBENCH_DIR",
                               Path(__file__).resolve().parents[2] / "shared/data/maskbench"))

# A schema's outcome (``status`` of a result).
PASS, FAIL, COMPILE_ERROR, EXCEPTION, TIMEOUT, CRASH = (
    "pass", "fail", "compile_error", "exception", "timeout", "crash")


def schema_files(sample: int | None = None, seed: int = 0, match: str = "") -> list[Path]:
    """The MaskBench files (names containing ``match``), sorted by name; with ``sample``,
    a seeded random choice of that many of them (still sorted)."""
    files = sorted(p for p in DATA_DIR.glob("*.json") if match in p.name)
    if sample is not None and sample < len(files):
        files = sorted(random.Random(seed).sample(files, sample))
    return files


def serialise(data: Any) -> str:
    """An instance as the upstream harness wrote it."""
    return json.dumps(data, ensure_ascii=False)


class Walker(Protocol):
    """One walk through a compiled schema (a tether Matcher satisfies it)."""

    def mask(self) -> np.ndarray: ...
    def consume(self, token_id: int) -> None: ...
    def eos_allowed(self) -> bool: ...


class Engine(Protocol):
    """What the method needs from an engine."""

    name: str

    def forget(self) -> None:
        """Drop what the engine keeps of earlier schemas' compiled forms (untimed: a
        schema's time to first mask is its own compile, not freeing the last one's)."""

    def compile(self, schema: Any) -> Any:
        """The compiled schema; raises on a refused or broken schema."""

    def start(self, compiled: Any) -> Walker:
        """A fresh walker at the start of the compiled schema."""

    def refusal(self, error: Exception) -> str | None:
        """The keyword if ``error`` is the engine refusing the schema (a compile error),
        ``None`` if it is an unexpected failure."""


class TetherEngine:
    """tether: ``tether.compile(tether.JsonSchema(schema), vocab)`` and its matchers."""

    name = "tether"

    def __init__(self, vocab: tether.Vocabulary) -> None:
        self.vocab = vocab

    def forget(self) -> None:
        # From scratch: a schema seen before (MaskBench has duplicates) would otherwise
        # come from the compile cache and its time to first mask would mean nothing.
        tether.compiler.clear_cache()

    def compile(self, schema: Any) -> tether.Compiled:
        return tether.compile(tether.JsonSchema(schema), self.vocab)

    def start(self, compiled: tether.Compiled) -> tether.Matcher:
        return compiled.matcher()

    def refusal(self, error: Exception) -> str | None:
        if isinstance(error, tether.CompileError):
            return tether_keyword(error.message, error.location,
                                  limit=isinstance(error, tether.LimitExceeded))
        return None


Encode = Callable[[str], list[int]]
TokenBytes = Callable[[int], bytes]


def run_schema(engine: Engine, path: Path, encode: Encode, token_bytes: TokenBytes, *,
               check: bool = False) -> dict[str, Any]:
    """The method on one MaskBench file: a JSON-serialisable result with ``status``,
    ``ttfm_s``, ``tbm_s`` (every mask time), the tests answered wrongly and, for a schema
    that did not compile, ``keyword`` and ``error``."""
    case = json.loads(path.read_text())
    result: dict[str, Any] = {
        "file": path.name, "engine": engine.name, "tests": len(case["tests"]),
        "keyword": None, "error": None, "ttfm_s": None, "tbm_s": [], "validation_errors": [],
        "invalidation_errors": [], "problems": []}
    engine.forget()
    started = time.perf_counter()
    try:
        compiled = engine.compile(case["schema"])
        engine.start(compiled).mask()
    except Exception as e:  # noqa: BLE001 - every failure is classified, none stops the run
        keyword = engine.refusal(e)
        result.update(status=EXCEPTION if keyword is None else COMPILE_ERROR, keyword=keyword,
                      error=f"{type(e).__name__}: {e}"[:500])
        return result
    result["ttfm_s"] = time.perf_counter() - started
    for index, test in enumerate(case["tests"]):
        text = serialise(test["data"])
        try:
            _run_test(engine, compiled, index, test["valid"], text, encode(text), token_bytes,
                      result, check)
        except Exception as e:  # noqa: BLE001
            result.update(status=EXCEPTION, error=f"test {index}: {type(e).__name__}: {e}"[:500])
            return result
    wrong = result["validation_errors"] or result["invalidation_errors"] or result["problems"]
    result["status"] = FAIL if wrong else PASS
    return result


def _run_test(engine: Engine, compiled: Any, index: int, valid: bool, text: str,
              tokens: list[int], token_bytes: TokenBytes, result: dict[str, Any],
              check: bool) -> None:
    walker = engine.start(compiled)
    timings = None if check else result["tbm_s"]
    step, problem = _walk(walker, tokens, timings, check)
    accepted = step is None
    if problem:
        result["problems"].append({"test": index, "step": step, "problem": problem})
    if valid and not accepted:
        done = b"".join(token_bytes(t) for t in tokens[:step])
        rejected = token_bytes(tokens[step]) if step < len(tokens) else b"<end of generation>"
        result["validation_errors"].append({
            "test": index, "step": step, "of": len(tokens),
            "after": done[-60:].decode("utf-8", "replace"),
            "rejected": rejected.decode("utf-8", "replace")})
    elif not valid and accepted:
        result["invalidation_errors"].append({"test": index, "text": text[:200]})
    if check and accepted == valid and compiled.check(text).matches != valid:
        result["problems"].append({"test": index, "problem": (
            "check() rejects a valid text the token walk accepts" if valid else
            "check() accepts an invalid text the token walk rejects")})


def _walk(walker: Walker, tokens: list[int], timings: list[float] | None,
          check: bool) -> tuple[int | None, str | None]:
    """Walk ``tokens`` then end of generation: ``(None, …)`` if all were allowed, else
    the step of the first one rejected (``len(tokens)``: end of generation); and, with
    ``check``, the inconsistency that stopped the walk."""
    for step, token in enumerate(tokens):
        words = _mask(walker, timings)
        allowed = bitmask.is_allowed(words, token)
        problem = _inconsistency(walker, words, token, allowed) if check else None
        if problem or not allowed:
            return step, problem
        walker.consume(token)
    words = _mask(walker, timings)
    problem = _inconsistency(walker, words, None, False) if check else None
    return (None if walker.eos_allowed() and not problem else len(tokens)), problem


def _mask(walker: Walker, timings: list[float] | None) -> np.ndarray:
    if timings is None:
        return walker.mask()
    started = time.perf_counter()
    words = walker.mask()
    timings.append(time.perf_counter() - started)
    return words


def _inconsistency(matcher: Any, words: np.ndarray, token: int | None,
                   allowed: bool) -> str | None:
    """What is wrong with a tether matcher's state, if anything: a dead end (an empty
    mask where end of generation is not allowed either), or ``allowed(token)``
    disagreeing with the mask."""
    if not words.any() and not matcher.eos_allowed():
        return "dead end: empty mask and end of generation not allowed"
    if token is not None and matcher.allowed(token) != allowed:
        return f"allowed({token}) disagrees with the mask"
    return None
