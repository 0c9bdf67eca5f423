"""``tether.grammars.python()`` against Python itself (issue 5, the Python bars).

* Real modules: 20 modules of the running interpreter's standard library (≥ 200 lines
  each) are accepted token by token with the real SmolLM2 tokenizer.
* Constructs: snippets of each construct the grammar covers are accepted, layout errors
  are rejected, and on a corpus of snippets and their mutations the grammar accepts
  exactly when ``ast.parse`` does and every block is indented by 4 more spaces (the one
  layout ``python()`` allows by default).
* Code blocks: ``python(fenced=True)`` is the module between ``"```python\n"`` and a
  closing fence at the start of a line after a complete statement.
* The embedded model: chat prompts under ``python(fenced=True)`` (256 tokens at most);
  most generations end by the grammar (the closing fence), and every one that does holds
  a module that ``ast.parse`` accepts.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import io
import itertools
import tokenize
import warnings
from pathlib import Path

import numpy as np
import pytest

import tether
import tether.grammars

# Pure-Python modules of 200-400 lines, 4-space indented, without ``match`` statements,
# and (for CI time) without very deep nesting: the engine's first pass over parser
# configurations it has not met costs more the deeper the blocks.
STDLIB_MODULES = (
    "zipapp", "py_compile", "getopt", "pty", "hmac", "copyreg", "quopri", "shelve", "glob",
    "copy", "types", "string", "filecmp", "code", "hashlib", "queue", "bz2", "shlex", "lzma",
    "timeit",
)


@pytest.fixture(scope="module")
def python(smollm2_vocab: tether.Vocabulary) -> tether.Compiled:
    return tether.compile(tether.grammars.python(), smollm2_vocab)


# -- real modules, token by token ---------------------------------------------------------
@pytest.mark.parametrize("name", STDLIB_MODULES)
def test_stdlib_module_accepted_token_by_token(name: str, python, smollm2_encode) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        pytest.skip(f"{name} is not a pure-Python module of this interpreter")
    source = Path(spec.origin).read_text(encoding="utf-8")
    assert len(source.splitlines()) >= 200
    matcher = python.matcher()
    for token in smollm2_encode(source):
        try:
            matcher.consume(token)
        except tether.ConstraintViolation:
            done = matcher.generated_bytes.decode("utf-8", "replace")
            pytest.fail(f"{name}: token {python.vocab.token_bytes(token)!r} refused on line "
                        f"{done.count(chr(10)) + 1}, after {done[-120:]!r}")
    assert matcher.eos_allowed(), f"{name}: the whole module is only a prefix"


# -- constructs ---------------------------------------------------------------------------
ACCEPTED = {
    "decorators": "@property\n@functools.lru_cache(maxsize=None)\ndef f(self):\n"
                  "    return 1\n\n\n@dataclass\nclass A:\n    x: int = 0\n",
    "async": "async def f(xs):\n    async with lock as l:\n        async for x in xs:\n"
             "            await g(x)\n    return [y async for y in h()]\n",
    "comprehensions": "a = [x * y for x in xs if x for y in ys]\nb = {k: v for k, v in d.items()}\n"
                      "c = {x for x in s}\nd = (x for x in range(3))\ne = sum(x for x in xs)\n",
    "f-strings": "s = f'{x!r:>10} and {y}'\nt = F\"{{literal}} {a['k']}\"\nu = rf'\\d{n}'\n",
    "walrus": "if (n := len(a)) > 10:\n    print(n)\nwhile chunk := f.read(10):\n    pass\n",
    "lambda": "f = lambda: 0\ng = lambda x, *a, y=1, **k: (x, a, y, k)\nh = lambda x, /, y: x\n",
    "star-args": "def f(a, /, b, *args, c, d=2, **kwargs):\n    return g(*args, *more, **kwargs)\n"
                 "first, *rest = items\nprint(*[1, 2], sep='')\n",
    "try": "try:\n    pass\nexcept (KeyError, ValueError) as e:\n    raise RuntimeError() from e\n"
           "except Exception:\n    pass\nelse:\n    pass\nfinally:\n    cleanup()\n",
    "except-star": "try:\n    f()\nexcept* OSError as group:\n    pass\n",
    "with-parenthesized": "with (\n    open(a) as f,\n    open(b) as g,\n):\n    pass\n",
    "nested-blocks": "class A:\n    def f(self):\n        for i in range(3):\n            if i:\n"
                     "                while True:\n                    break\n"
                     "            elif i > 1:\n                continue\n        else:\n"
                     "            return None\n",
    "comments-and-blank-lines": "# head\n\nimport os  # trailing\n\n\ndef f():\n"
                                "    # inside\n\n    x = 1\n        # over-indented comment\n"
                                "\n    return x\n# end\n",
    "backslash-continuation": "x = 1 + \\\n    2\nif a and \\\n   b:\n    pass\n",
    "brackets-spanning-lines": "x = [\n    1,\n  2,  # comment\n\n        3,\n]\n"
                               "f(a,\n  b)\nd = {\n'k':\n  'v'}\n",
    "strings": "s = '''doc\nstring''' \"x\" 'y'\nb = b'\\x00' rb\"\\n\"\nu = u'x'\n",
    "numbers": "n = [0, 10_000, 0x_FF, 0o17, 0b1010, 1.5, .5, 1e-3, 2j, 1_0.0_1e+1_0]\n",
    "statements": "import a.b as c, d\nfrom .. import (x as y, z,)\nfrom . import *\n"
                  "global g\ndel a[0], b.c\nassert x, 'msg'\nx += 1; y **= 2\nz: list[int]\n"
                  "a = b = c\nraise\n",
    "expressions": "x = not a and b or c if d else e\ny = a[1:2, ::3, ...]\n"
                   "z = -a ** -b // c @ d\nw = a is not b and c not in d\nv = x < y <= z\n",
    "annotated targets": "a.b: int = 1\nc[0]: str\n(d): int\n",
    "keywords beside brackets and strings": "x = not(y)if(z)else'w'\ndef f():\n    return\"v\"\n",
    "strings side by side": "x = \"\" \"a\" 'b''c' \"\"\"d\"\"\"\n",
}

REJECTED = {
    "unexpected indent": "x = 1\n    y = 2\n",
    "dedent to a level that never existed": "if x:\n    if y:\n        pass\n  z = 1\n",
    "block without a body": "def f():\nx = 1\n",
    "if without a colon": "if x\n    pass\n",
    "unbalanced bracket": "x = (1, 2]\n",
    "unclosed bracket at the end": "x = f(1,\n",
    "statement split outside brackets": "x = 1 +\n2\n",
    "else without if": "else:\n    pass\n",
    "two statements on one line": "x = 1 y = 2\n",
    "positional argument after a keyword": "f(a=1, b)\n",
    "iterable unpacking after a mapping": "f(**k, *b)\n",
    "bare generator beside another argument": "f(x for x in y, 1)\n",
    "keyword touching a name": "a insert\n",  # `insert` is one name, not `in sert`
    "keyword touching a name in a conditional": "x = (a if b elsewhere)\n",
    "long string opened and never closed": 'x = """abc"\n',  # not `""` then `"abc"`
    "annotation after an operator": "a in b: int\n",
    "keyword as a name": "x = a if b else if\n",  # HumanEval/61 at a budget's end
    "keyword as a statement": "def f(): if\n",
}


@pytest.mark.parametrize("name", ACCEPTED)
def test_construct_accepted(name: str, python) -> None:
    text = ACCEPTED[name]
    ast.parse(text)
    result = python.check(text)
    assert result.matches, (name, text[:result.valid_prefix], result.expected)


@pytest.mark.parametrize("name", REJECTED)
def test_layout_error_rejected(name: str, python) -> None:
    text = REJECTED[name]
    with pytest.raises(SyntaxError):
        ast.parse(text)
    assert not python.check(text).matches


def test_blocks_are_indented_by_the_unit(python, smollm2_vocab) -> None:
    text = "if x:\n  y = 2\n"
    ast.parse(text)
    assert not python.check(text).matches
    two = tether.compile(tether.grammars.python(indent="  "), smollm2_vocab)
    assert two.check(text).matches
    assert not two.check("if x:\n    y = 2\n").matches


@pytest.mark.parametrize("options", [{}, {"indent": "\t"}, {"indent": "  ", "fenced": True}])
def test_the_warm_up_sample_is_walked_to_its_end(options, smollm2_vocab) -> None:
    grammar = tether.grammars.python(**options)
    ast.parse(grammar.warm_up.removeprefix("```python\n").removesuffix("```\n"))
    compiled = tether.compile(grammar, smollm2_vocab)
    data = grammar.warm_up.encode()
    assert compiled.check(data).matches
    assert compiled.walk_sample(data) == len(smollm2_vocab.segment(data))


def test_the_warm_up_changes_no_mask(smollm2_vocab) -> None:
    text = b"def f(a, b=2):\n    return [x for x in a if x > b]\n"
    warm = tether.compile(tether.grammars.python(), smollm2_vocab).matcher()
    cold = tether.compile(dataclasses.replace(tether.grammars.python(), warm_up=None),
                          smollm2_vocab).matcher()
    for token in [*smollm2_vocab.segment(text), None]:
        assert np.array_equal(warm.mask(), cold.mask())
        if token is not None:
            warm.consume(token)
            cold.consume(token)


def test_a_warm_up_must_be_text() -> None:
    with pytest.raises(tether.CompileError, match="warm_up must be a str"):
        tether.Grammar("root ::= \"a\"", warm_up=b"a")


def test_unclosed_bracket_is_a_valid_prefix(python) -> None:
    text = REJECTED["unclosed bracket at the end"]
    assert python.check(text).valid_prefix == len(text)


# -- agreement with ast.parse on snippets and their mutations ---------------------------
SNIPPETS = [
    "def f(x):\n    if x:\n        return 1\n    return 2\n",
    "for i in range(10):\n    total += i\nelse:\n    done = True\n",
    "class C(Base, metaclass=M):\n    '''doc'''\n    def m(self, *a, **k):\n        pass\n",
    "while True:\n    try:\n        x = next(it)\n    except StopIteration:\n        break\n",
    "with open(p) as f, lock:\n    data = f.read()\n",
    "result = {\n    'a': [1, 2, 3],\n    'b': (4, 5),\n}\n",
    "if a:\n    pass\nelif b:\n    x = [i for i in y if i]\nelse:\n    x = None\n",
    "@decorator(arg)\nasync def main():\n    await asyncio.sleep(1)\n",
    "x = lambda a, b=2: a + b\nprint(x(1), end='')\n",
    "import sys\nif __name__ == '__main__':\n    sys.exit(main(sys.argv[1:]))\n",
    "def g():\n    yield from range(3)\n    y = yield\n    return y\n",
    "values = sorted(items, key=lambda t: (t[1], -t[0]), reverse=True)\n",
]


def _mutations(text: str) -> list[str]:
    """Small edits of ``text`` that a writer (or a model) could make: a character
    dropped or added at places that matter for layout and brackets."""
    out = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        stripped = line.lstrip(" ")
        if not stripped:
            continue
        for edit in (line + "  x" if line.endswith(":") else None,  # text after a header
                     line[:-1] if line.endswith(":") else None,  # colon dropped
                     " " + line,  # one space more
                     line[4:] if line.startswith("    ") else None,  # one level less
                     "    " + line,  # one level more
                     line[2:] if line.startswith("    ") else None):  # half a level less
            if edit is not None:
                out.append("\n".join(lines[:i] + [edit] + lines[i + 1:]))
    for i, ch in enumerate(text):
        if ch in "()[]{}:,='":
            out.append(text[:i] + text[i + 1:])  # one bracket or punctuation mark dropped
    out.append(text.rstrip("\n") + " +\n")  # an operand missing at the end
    return list(dict.fromkeys(out))


def _four_space_blocks(text: str) -> bool:
    """Whether every indented block of ``text`` is 4 spaces deeper than the one around it
    (for a text ``ast.parse`` accepts)."""
    depth = 0
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.INDENT:
            depth += 1
            if token.string != "    " * depth:
                return False
        elif token.type == tokenize.DEDENT:
            depth -= 1
    return True


def _ast_accepts(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return _four_space_blocks(text)


CORPUS = list(dict.fromkeys(
    SNIPPETS + [m for s in SNIPPETS for m in _mutations(s)]))


def test_corpus_is_large_and_mixed() -> None:
    verdicts = [_ast_accepts(t) for t in CORPUS]
    assert len(CORPUS) >= 100
    assert sum(verdicts) >= 30 and len(verdicts) - sum(verdicts) >= 30


def test_accepts_exactly_what_ast_parse_accepts(python) -> None:
    disagree = [(text, _ast_accepts(text)) for text in CORPUS
                if python.check(text).matches != _ast_accepts(text)]
    assert disagree == []


_BODIES = ["a", "\\x20", "\\x2", "\\x", "\\u0041", "\\u004", "\\U0001F600", "\\U0001F60",
           "\\N{EN DASH}", "\\N{", "\\q", "\\\\", "\\'", '\\"', "é", "\\é", "a\\\nb", "\\\r\nb",
           '"', "'", "\n"]


def test_string_escapes_as_python_reads_them(python) -> None:
    """Every prefix, quote and escape (complete or cut short: a budget's end may close a
    string right after ``\\x``) is accepted exactly when ``ast.parse`` accepts it (an
    f-string's braces aside: its replacement fields are not read)."""
    disagree = []
    for prefix, body, quote in itertools.product(
            ["", "r", "b", "rb", "f", "u", "Rb", "bR", "F", "fr"], _BODIES,
            ["'", '"', "'''", '"""']):
        if "f" in prefix.lower() and "{" in body:
            continue
        text = f"x = {prefix}{quote}{body}{quote}\n"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes warn (and are valid)
            expected = _ast_accepts(text)
        if python.check(text).matches != expected:
            disagree.append(text)
    assert disagree == []


# -- code blocks: python(fenced=True) ----------------------------------------------------
FENCE = "```python\n"

FENCED_ACCEPTED = {
    "after a top-level statement": FENCE + "x = 1\n```",
    "followed by one line break": FENCE + "x = 1\n```\n",
    "after a nested block": FENCE + "def f(x):\n    if x:\n        return 1\n    return 2\n```",
    "after a blank line in a block": FENCE + "def f():\n    return 2\n\n```",
    "empty module": FENCE + "```",
    "after a comment": FENCE + "# note\n```",
    "fence inside a string": FENCE + "s = '```'\nt = \"\"\"\n```\n\"\"\"\n```",
}

FENCED_REJECTED = {
    "text after the closing fence": FENCE + "x = 1\n```\nThat is all.",
    "two line breaks after the fence": FENCE + "x = 1\n```\n\n",
    "blanks after the fence": FENCE + "x = 1\n``` ",
    "fence ending a line of code": FENCE + "x = 1```",
    "indented fence": FENCE + "def f():\n    return 1\n    ```",
    "fence inside brackets": FENCE + "x = (\n```",
    "fence inside a string only": FENCE + "s = '```'\n",
    "no opening fence": "x = 1\n```",
    "blanks before the first statement": FENCE + "  x = 1\n```",
    "module as the fenced grammar rejects it": FENCE + "x = 1\n    y = 2\n```",
}


@pytest.fixture(scope="module")
def python_fenced(smollm2_vocab: tether.Vocabulary) -> tether.Compiled:
    return tether.compile(tether.grammars.python(fenced=True), smollm2_vocab)


def _fenced_module(text: str) -> str:
    """The module between the fences of a text ``python(fenced=True)`` accepts."""
    assert text.startswith(FENCE)
    body = text[len(FENCE):].removesuffix("\n").removesuffix("\r")
    assert body.endswith("```")
    return body[:-3]


@pytest.mark.parametrize("name", FENCED_ACCEPTED)
def test_fenced_block_accepted(name: str, python_fenced) -> None:
    text = FENCED_ACCEPTED[name]
    ast.parse(_fenced_module(text))
    result = python_fenced.check(text)
    assert result.matches, (name, text[:result.valid_prefix], result.expected)


@pytest.mark.parametrize("name", FENCED_REJECTED)
def test_fenced_block_rejected(name: str, python_fenced) -> None:
    assert not python_fenced.check(FENCED_REJECTED[name]).matches


def test_fenced_module_is_the_python_grammar(python, python_fenced) -> None:
    """Between the fences, exactly the modules ``python()`` accepts."""
    for text in [*ACCEPTED.values(), *REJECTED.values(), *CORPUS]:
        assert python_fenced.check(FENCE + text + "```").matches == python.check(text).matches


def test_fenced_block_finishes_at_the_closing_fence(python_fenced, smollm2_encode) -> None:
    matcher = python_fenced.matcher()
    for token in smollm2_encode(FENCE + "def f():\n    return 1\n```"):
        matcher.consume(token)
    assert matcher.eos_allowed()
    for token in smollm2_encode("\n"):
        matcher.consume(token)
    assert matcher.is_finished()


# -- the embedded model -------------------------------------------------------------------
PROMPTS = [
    "Write a short Python function that returns the square of a number.",
    "Write a Python function that checks whether a number is even.",
    "Write a Python function that reverses a string.",
    "Write a Python function that returns the maximum of a list.",
    "Write a Python function that counts the vowels in a string.",
    "Write a Python function that computes the factorial of n.",
    "Write a Python function that adds two numbers.",
    "Write a Python function that returns the first element of a list.",
    "Write a Python function that converts Celsius to Fahrenheit.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Write a Python function that sums a list of numbers.",
    "Write a Python function that returns the length of a string.",
    "Write a Python function that returns True if a list is empty.",
    "Write a Python function that doubles every item of a list.",
    "Write a Python function that returns the average of a list.",
    "Write a Python function that greets a person by name.",
    "Write a Python function that returns the absolute value of x.",
    "Write a Python function that computes the n-th Fibonacci number.",
    "Write a Python class with one method that returns 42.",
    "Write a Python function that removes duplicates from a list.",
]


@pytest.mark.model
def test_embedded_model_code_parses_when_the_grammar_ends_it(smollm2_vocab) -> None:
    """A chat model writes code in a fenced block: under ``python(fenced=True)`` its
    closing fence completes the constraint. (Prompted as a completion under the bare
    module grammar, the chat model never ends: it has no end-of-generation after code.)"""
    pytest.importorskip("llama_cpp")
    from tether.runtime import generate, load_model

    model = load_model()
    ended, unparsed, budget = [], [], []
    for seed, prompt in enumerate(PROMPTS):
        # compile() per prompt, as a server would: it rebuilds the constraint once its
        # automaton nears its bound (it keeps every parser configuration it meets).
        compiled = tether.compile(tether.grammars.python(fenced=True), smollm2_vocab)
        result = generate(prompt, compiled, model=model, max_tokens=256, seed=seed)
        if result.stop_reason not in ("eog", "constraint_complete"):
            budget.append((prompt, result.stop_reason))
            continue
        ended.append(prompt)
        assert compiled.check(result.text).matches, result.text
        try:
            ast.parse(_fenced_module(result.text))
        except SyntaxError as error:
            unparsed.append((prompt, result.text, str(error)))
    print(f"\n{len(ended)} of {len(PROMPTS)} generations ended by the grammar (closing "
          f"fence), {len(budget)} by the token budget")
    assert unparsed == []
    assert len(ended) > len(PROMPTS) // 2, budget
