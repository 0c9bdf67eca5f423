"""Exact masks on the whole regex corpus: every mask equals the independent oracle.

For each of the ≥ 50 regexes of tests/regex_corpus.py and each example, the example is
walked token by token (longest-match tokens of the SmolLM2 vocabulary; for examples
with non-ASCII text also one byte token at a time, which visits states in the middle of
UTF-8 characters) and, at every state, tether's mask is compared with the ``regex``
package's partial full match over the whole vocabulary (tests/regex_oracle.py).
The CI test checks a subset; this checks all of it (several minutes).

    taskset -c 1 .venv/bin/python bench/exact_masks.py
"""

from __future__ import annotations

import time

from _common import save, smollm2_gguf
from mask_walk import compare_walk
from regex_corpus import CORPUS

import tether


def main() -> None:
    vocab = tether.Vocabulary.from_file(smollm2_gguf())
    started = time.perf_counter()
    rows, problems, walks = [], [], 0
    for pattern, examples in CORPUS:
        for example in examples:
            modes = [False] + ([True] if not example.isascii() else [])
            for byte_tokens in modes:
                found = compare_walk(vocab, pattern, example, byte_tokens=byte_tokens)
                walks += 1
                problems += found
                rows.append({"pattern": pattern, "example": example,
                             "byte_tokens": byte_tokens, "problems": found})
        print(f"{'ok ' if not problems else 'BAD'} {pattern}", flush=True)
    elapsed = time.perf_counter() - started
    summary = {"regexes": len(CORPUS), "walks": walks, "mismatched_states": len(problems),
               "seconds": elapsed, "rows": rows}
    save("exact_masks", summary)
    print(f"{len(CORPUS)} regexes, {walks} walks, {len(problems)} states differing from "
          f"the oracle ({elapsed:.0f} s)")
    for p in problems[:20]:
        print("  ", p)


if __name__ == "__main__":
    main()
