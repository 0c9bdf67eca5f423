"""Mask time for regex constraints: tether vs llguidance, same regexes, same tokens.

For every regex of the corpus (tests/regex_corpus.py) and every example string, the
example is tokenised with the real tokenizer and both engines walk the same tokens:
compute the mask (timed), check the next token is allowed, consume it; at the end,
check end of generation is allowed. Time to first mask (TTFM) = compile + first mask,
for a regex never compiled before in the process.

    taskset -c 1 .venv/bin/python bench/regex_masks.py [--vocab smollm2,deepseek]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import llguidance_first_mask, load, save, summary
from regex_corpus import CORPUS

import tether
from tether.engine import bitmask


def bench_tether(tok, pattern: str, sequences: list[list[int]]) -> dict:
    vocab = tok.tether_vocab
    started = time.perf_counter()
    compiled = tether.compile(tether.Regex(pattern), vocab)
    compiled.matcher().mask()
    ttfm = time.perf_counter() - started
    tbm, rejected = [], 0
    for tokens in sequences:
        m = compiled.matcher()
        for t in tokens + [None]:
            t0 = time.perf_counter()
            words = m.mask()
            tbm.append(time.perf_counter() - t0)
            if t is None:
                rejected += not m.eos_allowed()
            elif not bitmask.is_allowed(words, t):
                rejected += 1
                break
            else:
                m.consume(t)
    return {"ttfm": ttfm, "tbm": tbm, "rejected": rejected}


def bench_llguidance(tok, pattern: str, sequences: list[list[int]]) -> dict:
    import llguidance
    from llguidance.numpy import fill_next_token_bitmask

    ll = tok.ll_tokenizer
    grammar, matcher, out, ttfm = llguidance_first_mask(ll, "regex", pattern,
                                                        tok.tether_vocab.size)
    if matcher.is_error():
        return {"ttfm": ttfm, "tbm": [], "rejected": -1, "error": matcher.get_error()}
    tbm, rejected = [], 0
    for tokens in sequences:
        matcher = llguidance.LLMatcher(ll, grammar, log_level=0)
        for t in tokens + [None]:
            t0 = time.perf_counter()
            fill_next_token_bitmask(matcher, out)
            tbm.append(time.perf_counter() - t0)
            row = out[0].view(np.uint32)
            if t is None:
                rejected += not matcher.is_accepting()
            elif not bitmask.is_allowed(row, t):
                rejected += 1
                break
            else:
                matcher.consume_token(t)
    return {"ttfm": ttfm, "tbm": tbm, "rejected": rejected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default="smollm2,deepseek")
    args = parser.parse_args()
    report = {}
    for name in args.vocab.split(","):
        tok = load(name)
        tok.tether_vocab.trie  # noqa: B018 - per-vocabulary work, shared by all constraints
        rows = []
        for pattern, examples in CORPUS:
            sequences = [tok.encode(e) for e in examples]
            ours = bench_tether(tok, pattern, sequences)
            peer = bench_llguidance(tok, pattern, sequences)
            rows.append({"pattern": pattern, "tether": ours, "llguidance": peer})
        all_ours = [x for r in rows for x in r["tether"]["tbm"]]
        all_peer = [x for r in rows for x in r["llguidance"]["tbm"]]
        ttfm_ours = [r["tether"]["ttfm"] for r in rows]
        ttfm_peer = [r["llguidance"]["ttfm"] for r in rows]
        result = {
            "vocab_size": tok.tether_vocab.size,
            "regexes": len(rows),
            "tether_tbm": summary(all_ours),
            "llguidance_tbm": summary(all_peer),
            "tether_ttfm": summary(ttfm_ours),
            "llguidance_ttfm": summary(ttfm_peer),
            "tether_rejected_valid": sum(r["tether"]["rejected"] for r in rows),
            "llguidance_rejected_valid": sum(max(0, r["llguidance"]["rejected"]) for r in rows),
            "llguidance_errors": [r["pattern"] for r in rows if "error" in r["llguidance"]],
            "slowest_ttfm": sorted(((r["tether"]["ttfm"] * 1e3, r["pattern"]) for r in rows),
                                   reverse=True)[:5],
        }
        result["ratio_mean_tbm"] = (result["tether_tbm"]["mean_us"]
                                    / result["llguidance_tbm"]["mean_us"])
        result["ratio_median_tbm"] = (result["tether_tbm"]["median_us"]
                                      / result["llguidance_tbm"]["median_us"])
        report[name] = result
        _print(name, result)
    path = save("regex_masks", report)
    print(f"saved {path}")


def _print(name: str, r: dict) -> None:
    t, p = r["tether_tbm"], r["llguidance_tbm"]
    print(f"== {name} (V={r['vocab_size']}, {r['regexes']} regexes, {t['n']} masks)")
    print(f"  mask time   tether median {t['median_us']:.1f} us  mean {t['mean_us']:.1f} us"
          f"  p99 {t['p99_us']:.0f} us  max {t['max_us']:.0f} us")
    print(f"              llguidance median {p['median_us']:.1f} us  mean {p['mean_us']:.1f} us"
          f"  p99 {p['p99_us']:.0f} us  max {p['max_us']:.0f} us")
    print(f"  ratio       median {r['ratio_median_tbm']:.2f}x  mean {r['ratio_mean_tbm']:.2f}x")
    tt, pt = r["tether_ttfm"], r["llguidance_ttfm"]
    print(f"  first mask  tether median {tt['median_us'] / 1e3:.1f} ms max "
          f"{tt['max_us'] / 1e3:.1f} ms; llguidance median {pt['median_us'] / 1e3:.1f} ms "
          f"max {pt['max_us'] / 1e3:.1f} ms")
    print(f"  valid strings rejected: tether {r['tether_rejected_valid']}, "
          f"llguidance {r['llguidance_rejected_valid']}; llguidance errors "
          f"{r['llguidance_errors']}")
    print(f"  slowest tether first masks (ms): {r['slowest_ttfm']}")


if __name__ == "__main__":
    main()
