"""The official JSON-Schema-Test-Suite (draft 2020-12, ``../shared/data/jsts``) walked
token by token: each test instance is serialised with ``json.dumps(data,
ensure_ascii=False)`` and fed to a matcher of its schema; a valid instance must be
accepted to its end, an invalid one rejected somewhere. A schema tether refuses to
compile counts its tests as unsupported. The suite's ``remotes/`` are the registry
(``http://localhost:1234/…``), as the suite prescribes. Used by
``tests/test_json_schema_suite.py`` and ``bench/json_schema_suite.py``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import tether
from tether.errors import TetherError

SUITE = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsts"
OUTCOMES = ("right", "wrong accept", "wrong reject", "unsupported")


def remotes() -> dict[str, object]:
    """The suite's remote schemas by the URI its tests use for them."""
    root = SUITE / "remotes"
    return {f"http://localhost:1234/{p.relative_to(root).as_posix()}": json.loads(p.read_text())
            for p in sorted(root.rglob("*.json"))}


def run_suite(vocab: tether.Vocabulary, encode, formats: str = "assert"
              ) -> dict[str, Counter]:
    """Per test file: how many tests came out right, wrongly accepted, wrongly rejected
    or unsupported. ``encode`` turns a text into the vocabulary's token ids; ``formats``
    is :class:`~tether.JsonSchema`'s option."""
    registry = remotes()
    table: dict[str, Counter] = {}
    for path in sorted((SUITE / "tests" / "draft2020-12").glob("*.json")):
        counts = table.setdefault(path.stem, Counter())
        for case in json.loads(path.read_text()):
            try:
                compiled = tether.compile(
                    tether.JsonSchema(case["schema"], registry=registry, formats=formats),
                    vocab)
            except TetherError:
                counts["unsupported"] += len(case["tests"])
                continue
            for test in case["tests"]:
                accepted = accepts(compiled, encode(json.dumps(test["data"], ensure_ascii=False)))
                counts["right" if accepted == test["valid"] else
                       "wrong accept" if accepted else "wrong reject"] += 1
    return table


def accepts(compiled: tether.Compiled, tokens: list[int]) -> bool:
    """Whether ``tokens`` are allowed one by one and end accepted."""
    matcher = compiled.matcher()
    for token in tokens:
        if not matcher.allowed(token):
            return False
        matcher.consume(token)
    return matcher.is_accepting()
