"""Every compiled kernel the engine runs is loaded when tether is imported (each module's
``_warm_up``), not inside the first mask or compile that needs it: numba loads each
variant of a kernel — read-only arrays, columns of a table — apart, 3-11 ms each from its
disk cache. Checked in a fresh process over constraints of every kind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import json, sys
import numba.core.dispatcher as dispatcher
import numpy as np

import tether
import tether.engine.batch
import tether.grammars
import tether.schema.strings

loaded = []
compile_one = dispatcher.Dispatcher.compile

def noted(self, sig):
    before = len(self.overloads)
    out = compile_one(self, sig)
    if len(self.overloads) > before:
        loaded.append(f"{self.py_func.__module__}.{self.py_func.__name__} {sig}")
    return out

dispatcher.Dispatcher.compile = noted
vocab = tether.Vocabulary.from_file(sys.argv[1])
by_bytes = {vocab.token_bytes(t): t for t in range(vocab.size)}
schema = {"type": "object", "properties": {
    "name": {"type": "string", "minLength": 2, "maxLength": 40},
    "id": {"type": "string", "pattern": "^[a-f0-9]{8}$"},
    "when": {"type": "string", "format": "date-time"},
    "size": {"type": "number", "minimum": 1, "maximum": 100},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
    "extra": {"type": "object", "additionalProperties": {"type": "integer"}}},
    "required": ["name"]}
value = {"name": "Ada \u00e9\\\"x", "id": "0123abcd", "when": "2024-01-02T03:04:05Z",
         "size": 12.5, "tags": ["a", "c"], "extra": {"k": 1, "key": -2}}
cases = [(tether.JsonSchema(schema), json.dumps(value, ensure_ascii=False)),
         (tether.grammars.python(), "def f(x):\n    return [y * 2 for y in x if y]\n"),
         (tether.Regex(r"[a-z]+@[a-z]+\.(com|org)"), "abc@def.org")]
matchers = []
for constraint, text in cases:
    matcher = tether.compile(constraint, vocab).matcher()
    for token in vocab.segment_fewest(text.encode()):
        matcher.mask()
        matcher.consume(token)
    matchers.append(tether.compile(constraint, vocab).matcher())
walker = tether.compile(cases[0][0], vocab).matcher()  # (a byte at a time: other paths)
for byte in cases[0][1].encode():
    walker.mask()
    walker.consume(by_bytes[bytes([byte])])
out = np.zeros((len(matchers), tether.engine.bitmask.n_words(vocab.size)), dtype=np.uint32)
tether.fill_masks(matchers, out, threads=2)
print("\n".join(loaded))
"""


def test_kernels_are_loaded_at_import(smollm2_gguf: Path) -> None:
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(smollm2_gguf)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "", f"kernels loaded after import:\n{run.stdout}"
