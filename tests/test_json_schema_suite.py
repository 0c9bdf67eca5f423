"""The official JSON-Schema-Test-Suite, draft 2020-12, walked byte by byte
(:mod:`json_schema_suite`): no wrong accept anywhere, and no fewer right answers than
measured (docs/json-schema.md has the per-file table with real tokenizers)."""

from __future__ import annotations

import pytest
from json_schema_suite import SUITE, run_suite

import tether

RIGHT_AT_LEAST = 1_167  # of 1,299 (1,172 measured, bytes and SmolLM2 alike)
RIGHT_ANNOTATED = 1_216  # with formats="annotate" (1,221 measured)


@pytest.mark.skipif(not SUITE.is_dir(), reason="needs ../shared/data/jsts")
@pytest.mark.parametrize(("formats", "right_at_least"), [("assert", RIGHT_AT_LEAST),
                                                         ("annotate", RIGHT_ANNOTATED)])
def test_the_suite_has_no_wrong_accept(formats: str, right_at_least: int) -> None:
    table = run_suite(tether.Vocabulary.of_bytes(), lambda text: list(text.encode()),
                      formats)
    wrong = {name: c["wrong accept"] for name, c in table.items() if c["wrong accept"]}
    assert not wrong
    assert sum(c["right"] for c in table.values()) >= right_at_least
