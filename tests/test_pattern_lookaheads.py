"""Leading lookaheads in ``pattern`` (schema/lookaheads.py): each pattern compiled and
every word walked byte by byte, compared with the ``jsonschema`` validator (Python's
``re`` runs the lookaheads); patterns with a lookahead elsewhere stay refused."""

from __future__ import annotations

import json

import jsonschema
import pytest
from json_schema_suite import accepts

import tether
from tether.schema.lookaheads import split_lookaheads

VOCAB = tether.Vocabulary.of_bytes()

PATTERNS = [
    r"^(?!@@)[@a-zA-Z0-9_-]+$",
    r"^(?!io\.papermc\.)([a-zA-Z_$][a-zA-Z\d_$]*\.)*[a-zA-Z_$][a-zA-Z\d_$]*$",
    r"^(?![ \t\n]*\(default(.*)\))[\s\S]*",
    r"^(?=a)(?!ab)\w+",
    r"^(?![)])x",
    r"^(?!a\))x",
]
WORDS = ["@@x", "@x", "abc", "ab", "a", "b", "c", "io.papermc.x", "io.paper.x", "x.y",
         " (default(1))", "(defaultx)", ")x", "x", "a)x", "xa", ""]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_leading_lookaheads_match_the_validator(pattern: str) -> None:
    schema = {"type": "string", "pattern": pattern}
    compiled = tether.compile(tether.JsonSchema(schema), VOCAB)
    validator = jsonschema.Draft202012Validator(schema)
    for word in WORDS:
        assert accepts(compiled, list(json.dumps(word).encode())) == validator.is_valid(word), word


@pytest.mark.parametrize("pattern", [r"^(?!a)b|c", r"^a(?!b)", r"x(?=y)"])
def test_other_lookaheads_stay_refused(pattern: str) -> None:
    assert split_lookaheads(pattern) == (frozenset({pattern}), frozenset())
    with pytest.raises(tether.CompileError, match="lookahead"):
        tether.compile(tether.JsonSchema({"type": "string", "pattern": pattern}), VOCAB)
