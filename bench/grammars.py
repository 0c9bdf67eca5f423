"""Mask time for grammars: tether vs llguidance (Lark), same grammars, same tokens.

JSON written as a Lark grammar (``tests/grammars/json.lark``) and the SQL SELECT subset
(``tests/grammars/sql_select.lark``) go to both engines as the same Lark text. Their
token sequences are random strings of the grammar (the generator of
``tests/grammar_oracles.py``) tokenised with the real SmolLM2 tokenizer. For each
sequence both engines walk the same tokens, one after the other: compute the mask
(timed), check the next token is allowed, consume it; at the end check end of generation
is allowed. Statistics cover the sequences both engines accept to the end (a refusal is
counted: llguidance lexes greedily, so where tether, like Lark's Earley parser, reads
``fromx`` as the keyword ``from`` then the name ``x``, llguidance sees one name). Time
to first mask (TTFM) = compile + first mask, from an empty cache.

Python (``tether.grammars.python()``): tether alone, on standard-library modules walked
as ``bench/python_masks.py`` does, with the compile time (first, then cached). llguidance
has no Python grammar of the same language: its Lark has no indentation-aware lexing
(``%declare`` of INDENT/DEDENT terminals is "not supported yet") and ``python.lark`` is
written with tether's layout markers.

    taskset -c 1 .venv/bin/python bench/grammars.py [--strings 200] [--seed 0]
        [--modules glob,shelve,hmac]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import time
from pathlib import Path

import numpy as np
from _common import ROOT, llguidance_first_mask, load, save, summary
from grammar_oracles import IrRecognizer
from python_masks import walk as tether_walk

import tether
import tether.grammars
from tether.compiler import clear_cache
from tether.engine import bitmask
from tether.grammar.lark import parse_lark

GRAMMARS = {"json": ROOT / "tests/grammars/json.lark",
            "sql_select": ROOT / "tests/grammars/sql_select.lark"}
BUDGETS = (40, 120, 400)  # derivation steps of the generator before it closes up
LENGTHS = (8, 600)  # characters of the strings kept


def strings(lark_text: str, n: int, rng: random.Random, encode, token_bytes) -> list[list[int]]:
    """Token sequences of ``n`` random strings of the grammar (those the tokenizer
    spells exactly, of a length in ``LENGTHS``), blanks at both ends removed: llguidance
    does not allow ignored text before the first token or after the last."""
    recognizer = IrRecognizer(parse_lark(lark_text))
    out: list[list[int]] = []
    for _ in range(50 * n):
        if len(out) == n:
            break
        text = recognizer.sample(rng, budget=rng.choice(BUDGETS)).strip(" \t\r\n")
        tokens = encode(text)
        if (LENGTHS[0] <= len(text) <= LENGTHS[1]
                and b"".join(map(token_bytes, tokens)) == text.encode()):
            out.append(tokens)
    return out


def tether_first_mask(constraint: tether.Grammar, vocab: tether.Vocabulary):
    """(compiled, seconds to compile from an empty cache and compute the first mask)."""
    clear_cache()
    started = time.perf_counter()
    compiled = tether.compile(constraint, vocab)
    compiled.matcher().mask()
    return compiled, time.perf_counter() - started


def llguidance_walk(ll_tokenizer, grammar, out: np.ndarray,
                    tokens: list[int]) -> list[float] | None:
    """Mask times of one walk (None if llguidance refuses a token or the end)."""
    import llguidance
    from llguidance.numpy import fill_next_token_bitmask

    matcher = llguidance.LLMatcher(ll_tokenizer, grammar, log_level=0)
    times = []
    for token in [*tokens, None]:
        started = time.perf_counter()
        fill_next_token_bitmask(matcher, out)
        times.append(time.perf_counter() - started)
        if token is None:
            return times if matcher.is_accepting() else None
        if not bitmask.is_allowed(out[0].view(np.uint32), token):
            return None
        matcher.consume_token(token)
    return times


def bench_lark(tok, name: str, n: int, seed: int) -> dict:
    """tether and llguidance on one Lark grammar, the same token sequences."""
    text = GRAMMARS[name].read_text()
    vocab = tok.tether_vocab
    sequences = strings(text, n, random.Random(seed), tok.encode, vocab.token_bytes)
    compiled, ttfm_ours = tether_first_mask(tether.Grammar(text, syntax="lark"), vocab)
    grammar, matcher, out, ttfm_peer = llguidance_first_mask(tok.ll_tokenizer, "lark", text,
                                                             vocab.size)
    if matcher.is_error():
        raise SystemExit(f"llguidance refused the grammar: {matcher.get_error()}")
    ours, peer, refused = [], [], 0
    for tokens in sequences:
        times = tether_walk(compiled, tokens)  # stops the run if tether refuses
        peer_times = llguidance_walk(tok.ll_tokenizer, grammar, out, tokens)
        if peer_times is None:
            refused += 1
            continue
        ours += times
        peer += peer_times
    return {"sequences": len(sequences), "llguidance_refused": refused,
            "tether": summary(ours), "llguidance": summary(peer),
            "tether_ttfm_ms": ttfm_ours * 1e3, "llguidance_ttfm_ms": ttfm_peer * 1e3}


def bench_python(tok, modules: list[str]) -> dict:
    """tether alone: compile time and mask times over standard-library modules."""
    vocab = tok.tether_vocab
    compiled, ttfm = tether_first_mask(tether.grammars.python(), vocab)
    started = time.perf_counter()
    tether.compile(tether.grammars.python(), vocab)
    cached = time.perf_counter() - started
    times: list[float] = []
    for name in modules:
        source = Path(importlib.util.find_spec(name).origin).read_text()
        times += tether_walk(compiled, tok.encode(source))
    return {"sequences": len(modules), "tether": summary(times),
            "tether_ttfm_ms": ttfm * 1e3, "compile_cached_us": cached * 1e6,
            "compile_first_ms": compiled.compile_seconds * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strings", type=int, default=200, help="strings per grammar")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modules", default="glob,shelve,hmac",
                        help="standard-library modules walked with the Python grammar")
    args = parser.parse_args()
    tok = load("smollm2")
    tok.tether_vocab.trie  # noqa: B018 - per-vocabulary work, shared by all constraints
    report = {name: bench_lark(tok, name, args.strings, args.seed) for name in GRAMMARS}
    report["python"] = bench_python(tok, args.modules.split(","))
    _print(report)
    print(f"saved {save('grammars', report)}")


def _print(report: dict) -> None:
    print("mask time per token, SmolLM2 (49k), us: mean / p50 / p99 / max; TTFM ms")
    print(f"{'grammar':>10} {'seqs':>5} {'masks':>6} | {'tether':^27} | {'llguidance':^27} |"
          f" {'ratio mean':>10} {'ratio p50':>9} | {'TTFM tether':>11} {'llguidance':>10}")
    for name, r in report.items():
        t = r["tether"]
        ours = f"{t['mean_us']:6.1f} {t['median_us']:6.1f} {t['p99_us']:6.0f} {t['max_us']:6.0f}"
        if "llguidance" in r:
            p = r["llguidance"]
            peer = (f"{p['mean_us']:6.1f} {p['median_us']:6.1f} {p['p99_us']:6.0f} "
                    f"{p['max_us']:6.0f}")
            ratios = (f"{t['mean_us'] / p['mean_us']:9.2f}x "
                      f"{t['median_us'] / p['median_us']:8.3f}x")
            ttfm = f"{r['tether_ttfm_ms']:11.1f} {r['llguidance_ttfm_ms']:10.1f}"
        else:
            peer, ratios = f"{'n/a':^27}", f"{'':>9}  {'':>8} "
            ttfm = f"{r['tether_ttfm_ms']:11.1f} {'n/a':>10}"
        print(f"{name:>10} {r['sequences']:>5} {t['n']:>6} | {ours} | {peer} | {ratios} |"
              f" {ttfm}")
    for name, r in report.items():
        if r.get("llguidance_refused"):
            print(f"  {name}: llguidance refused {r['llguidance_refused']} of "
                  f"{r['sequences']} strings (left out of both columns)")
    py = report["python"]
    print(f"  python: compile {py['compile_first_ms']:.0f} ms, then {py['compile_cached_us']:.1f}"
          f" us (cached); llguidance n/a: its Lark has no indentation-aware lexing")


if __name__ == "__main__":
    main()
