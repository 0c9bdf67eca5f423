"""The fuzz campaign (docs/errors.md): random and mutated inputs on every input surface,
and the properties each must keep.

A *surface* is a function ``(rng) -> str`` that builds one input from ``rng``, feeds it to
tether and returns how it went: ``"accepted"`` (tether took it; every text it then
accepted was checked against an independent reference) or ``"refused"`` (a
:class:`~tether.TetherError`). Anything else — another exception, a reference that
disagrees, an input that outlives :data:`SECONDS_PER_INPUT` — is a :class:`Failure`.

``tests/test_fuzz.py`` runs a slice of it; ``bench/fuzz.py`` (``make fuzz``) the long run.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import random
import signal
import tempfile
from collections.abc import Callable, Iterator
from decimal import MAX_EMAX, MIN_EMIN, Decimal, InvalidOperation, localcontext
from pathlib import Path
from typing import Any

import numpy as np
import regex
from grammar_oracles import lark_accepts, lark_parser, mutate
from regex_oracle import python_classes

import tether
from tether.cli import main
from tether.fusion import parse_constraint_spec
from tether.sampling import parse_program
from tether.vocab import Vocabulary

SECONDS_PER_INPUT = 30  # a bound on any one input: compile, walks and reference checks
WALKS = 3  # texts drawn from each accepted constraint
MAX_WALK = 200  # bytes per drawn text
BYTES = Vocabulary.of_bytes()
ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
GRAMMARS = Path(__file__).parent / "grammars"


class Failure(Exception):
    """A property of the campaign does not hold for one input."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise :class:`Failure` when the body runs longer than ``seconds``."""
    def expire(signum, frame):
        raise Failure(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_one(surface: Callable[[random.Random], str], seed: int) -> str:
    """Run ``surface`` on the input of ``seed``: its outcome, or :class:`Failure`."""
    rng = random.Random(seed)
    with time_limit(SECONDS_PER_INPUT):
        try:
            return surface(rng)
        except tether.TetherError:
            return "refused"
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001 - any other exception is what we look for
            raise Failure(f"{type(e).__name__}: {e}") from e


# -- drawing texts a compiled constraint accepts -------------------------------------------
def walks(compiled: tether.Compiled, rng: random.Random) -> list[bytes]:
    """Up to :data:`WALKS` texts the constraint accepts, drawn byte by byte at random."""
    out = []
    for _ in range(WALKS):
        m = compiled.matcher()
        for _ in range(MAX_WALK):
            if m.is_accepting() and rng.random() < 0.15:
                break
            bits = np.unpackbits(m.mask().view(np.uint8), bitorder="little")[:256]
            allowed = np.nonzero(bits)[0]
            if not len(allowed):
                break
            m.consume(int(rng.choice(allowed.tolist())))
        if m.is_accepting():
            out.append(m.generated_bytes)
    return out


# -- regex ---------------------------------------------------------------------------------
REGEX_PIECES = ["a", "b", "z", "0", "9", ".", "[a-z]", "[^a]", "[^\\d]", "\\d", "\\w", "\\s",
                "\\D", "(", ")", "(?:", "|", "*", "+", "?", "*?", "{2,3}", "{,5}", "{3}",
                "{1000000}", "{2,1}", "^", "$", "\\", "\\b", "(?=a)", "\\p{L}", "é", "😀",
                "\\u00e9", "\\x41", "[", "]", "-", "(?i)", "(?u)", "{", "}", "\\n", "\\.",
                "[\\w-]", "[a-]", "(?P<n>", "\\1", "(?#c)", "[[:alpha:]]", "\\Z", "\\A"]


def regex_surface(rng: random.Random) -> str:
    pattern = "".join(rng.choice(REGEX_PIECES) for _ in range(rng.randint(1, 12)))
    compiled = tether.compile(tether.Regex(pattern), BYTES)
    try:  # ``regex`` reads POSIX classes (``[[:alpha:]]``) where tether and ``re`` do not
        reference = None if "[:" in pattern else regex.compile(python_classes(pattern),
                                                               regex.V0)
    except Exception:  # noqa: BLE001 - a pattern the reference reads differently: no oracle
        reference = None
    for data in walks(compiled, rng):
        text = data.decode("utf-8")  # accepted texts are UTF-8 (raises otherwise)
        if reference is not None and reference.fullmatch(text) is None:
            raise Failure(f"regex {pattern!r} accepted {text!r}; the reference refuses it")
    return "accepted"


# -- JSON Schema ---------------------------------------------------------------------------
def _schema_pool() -> list[Path]:
    files = sorted((SHARED / "maskbench").glob("*.json")) + sorted(
        (SHARED / "glaive").rglob("*.json"))
    return files


SCHEMA_FILES = _schema_pool()
KEYWORDS = ["type", "enum", "const", "properties", "required", "additionalProperties",
            "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength",
            "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
            "exclusiveMaximum", "multipleOf", "allOf", "anyOf", "oneOf", "not", "if", "then",
            "else", "$ref", "$defs", "patternProperties", "propertyNames", "minProperties",
            "maxProperties", "uniqueItems", "contains", "dependentRequired", "nullable",
            "unevaluatedProperties", "x-custom", "default"]
VALUES: list[Any] = [0, 1, -1, 2, 0.5, 1e200, 1e-300, -3.25, 10**30, True, False, None, "",
                     "string", "integer", "number", "object", "array", "null", "boolean",
                     "^[a-z]+$", "[", "(a|b)*c", "\\d{2,4}", "date-time", "email", "uuid",
                     "#/$defs/x", "#", "#/properties", [], ["a"], ["string", "null"],
                     {}, {"type": "string"}, {"type": "integer", "minimum": 3},
                     {"enum": [1, "a", None]}, [{"type": "string"}, {"type": "number"}],
                     {"x": {"type": "boolean"}}]


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    if depth > 3 or rng.random() < 0.5:
        return copy.deepcopy(rng.choice(VALUES))
    if rng.random() < 0.5:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(KEYWORDS): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _nodes(value: Any) -> list[dict]:
    out, stack = [], [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def mutate_schema(schema: Any, rng: random.Random) -> Any:
    """``schema`` with one to three random edits."""
    for _ in range(rng.randint(1, 3)):
        nodes = _nodes(schema)
        if not nodes:
            return _random_json(rng)
        node = rng.choice(nodes)
        op = rng.randrange(5)
        if op == 0 and node:
            del node[rng.choice(list(node))]
        elif op == 1:
            node[rng.choice(KEYWORDS)] = _random_json(rng)
        elif op == 2 and node:
            key = rng.choice(list(node))
            node[key] = {"allOf": [node[key], _random_json(rng)]} if rng.random() < 0.5 \
                else {"anyOf": [node[key], {"not": _random_json(rng)}]}
        elif op == 3:
            node["type"] = rng.choice(["string", "number", "integer", "object", "array",
                                       ["string", "null"], "boolean", "nope"])
        else:
            for key in [k for k in node if isinstance(node[k], int | float)
                        and not isinstance(node[k], bool)]:
                node[key] = rng.choice([0, -1, 0.1, 1e200, 1e-300, 7, 2.5, 10**20])
    return schema


def schema_surface(rng: random.Random) -> str:
    if SCHEMA_FILES and rng.random() < 0.8:  # (random schemas only, without the shared data)
        schema = json.loads(rng.choice(SCHEMA_FILES).read_text())
        schema = mutate_schema(schema, rng) if rng.random() < 0.9 else schema
    else:
        schema = _random_json(rng)
    text = json.dumps(schema) if rng.random() < 0.5 else None
    constraint = tether.JsonSchema(text if text is not None else schema)
    compiled = tether.compile(constraint, BYTES)
    validator = _validator(constraint.schema_json)
    for data in walks(compiled, rng):
        json.loads(data)  # accepted texts are JSON
        if validator is None:
            continue
        try:  # exact arithmetic: tether's semantics (jsonschema divides floats)
            with localcontext(Emax=MAX_EMAX, Emin=MIN_EMIN, prec=2_000):
                instance = json.loads(data, parse_float=Decimal)
                errors = [e for e in validator.iter_errors(instance) if not _dialect_gap(e)]
        except InvalidOperation:  # an exponent or quotient past what Decimal can hold
            continue
        if errors:
            raise Failure(f"schema accepted {data[:200]!r}; jsonschema: {errors[0].message}"
                          f" at {list(errors[0].absolute_schema_path)}")
    return "accepted"


def _validator(schema_json: str):
    """A ``jsonschema`` validator for the schema, or None where it is no reference:
    OpenAPI's ``nullable`` (tether reads it; jsonschema ignores it), or a schema
    jsonschema cannot use."""
    import jsonschema

    if '"nullable"' in schema_json:
        return None
    schema = json.loads(schema_json, parse_float=Decimal)
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema)
    except Exception:  # noqa: BLE001 - not a schema jsonschema can use as a reference
        return None


def _dialect_gap(error) -> bool:
    """A pattern whose negated class (``\\D \\W \\S``) tether reads as ECMA-262 does and
    Python's ``re`` (jsonschema's engine) reads with Unicode classes."""
    return error.validator == "pattern" and bool(regex.search(r"\\[DWSB]", error.validator_value))


# -- grammars ------------------------------------------------------------------------------
GRAMMAR_TEXTS = {path: path.read_text() for path in sorted(GRAMMARS.glob("*.*"))
                 if path.suffix in (".gbnf", ".lark")}
GRAMMAR_ALPHABET = " ()[]{}|*+?:;=\"'.\\/-_#<>~^$%0123456789aZz\nrootexpr"


def grammar_surface(rng: random.Random) -> str:
    path = rng.choice(list(GRAMMAR_TEXTS))
    text = GRAMMAR_TEXTS[path]
    draw = rng.random()
    if draw < 0.15:
        text = amplify(rng, text)
    elif draw < 0.9:
        text = mutate(rng, text, GRAMMAR_ALPHABET)
    syntax = path.suffix[1:]
    compiled = tether.compile(tether.Grammar(text, syntax=syntax), BYTES)
    texts = walks(compiled, rng)
    if syntax == "lark" and texts:
        try:
            reference = lark_parser(text)
        except Exception:  # noqa: BLE001 - lark refuses the mutant: no reference
            return "accepted"
        for data in texts:
            decoded = data.decode("utf-8")
            if not lark_accepts(reference, decoded):
                raise Failure(f"lark grammar {path.name} (mutated) accepted {decoded!r}; "
                              "lark refuses it")
    return "accepted"


def amplify(rng: random.Random, text: str) -> str:
    """``text`` with a slice of it (1-12 characters) repeated hundreds to thousands of
    times in place: deep nesting, stacked repetitions, long sequences and chains of
    rules, which one-character edits never reach (before they were bounded, one such
    input in fifteen overflowed Python's stack)."""
    k = rng.randint(0, len(text))
    piece = text[k:k + rng.randint(1, 12)] or "("
    return text[:k] + piece * rng.randint(100, 3_000) + text[k:]


# -- the sampling DSL ------------------------------------------------------------------------
DSL_LINES = ["top_k 40", "top_k 0", "top_k -1", "top_k 1e9", "top_p 0.9", "top_p 1.5",
             "top_p nan", "min_p 0.1", "temperature 0.7", "temperature 0", "temperature inf",
             "penalty repetition 1.1", "penalty presence 0.5", "penalty frequency -2",
             "penalty bogus 1", "sort", "sort -", "sort +", "slice 0:5", "slice ::-1",
             "slice 1:2:0", "threshold < 0.1", "threshold >= -inf", "softmax", "cumsum",
             "cumsum exclusive", "logits", "mask", "mask", "sample", "argmax", "beam 4",
             "beam 0", "# comment", "", "top_k", "top_k 4 5", "temperature -1", "ｔｏｐ_k 3",
             "slice a:b", "threshold ~ 1"]


def dsl_surface(rng: random.Random) -> str:
    text = "\n".join(rng.choice(DSL_LINES) for _ in range(rng.randint(0, 6)))
    program = parse_program(text)
    vocab = 32
    logits = np.asarray([rng.choice([0.0, 1.5, -3.0, 10.0, -np.inf, 1e30]) for _ in range(vocab)],
                        dtype=np.float32)
    mask = np.asarray([rng.random() < 0.7 for _ in range(vocab)])
    history = [rng.randrange(vocab) for _ in range(rng.randint(0, 5))]
    program.apply(logits, mask, history)
    if program.pick != "beam":
        program.sample(logits, mask, history, rng=np.random.default_rng(rng.randrange(1000)))
    return "accepted"


# -- constraint specs --------------------------------------------------------------------------
SPEC_KEYS = ["intensity", "control_flow_weight", "semantics_weight", "adaptive_switching",
             "soft_temperature", "allow_relaxation", "on_budget", "enabled_domains",
             "disabled_domains", "delimiters", "regex", "json_schema", "language", "imports",
             "available_modules", "forbidden_imports", "fusion", "syntax", "bogus"]
SPEC_VALUES: list[Any] = ["standard", "minimal", "full", "exact", "report", "relax", 0, 1.5,
                          -1, float("nan"), True, None, [], ["syntax"], ["types", "bogus"],
                          "python", "python-fenced", ["math", "from os import path"], ["a b"],
                          "[a-z]+", "(", {"open": "<", "close": ">"}, {}, "x" * 50]


def spec_surface(rng: random.Random) -> str:
    spec = {rng.choice(SPEC_KEYS): rng.choice(SPEC_VALUES) for _ in range(rng.randint(0, 5))}
    if rng.random() < 0.5:
        text = json.dumps(spec)
        parse_constraint_spec(mutate(rng, text, '{}[]":,0123456789aez-') if rng.random() < 0.5
                              else text)
    else:
        parse_constraint_spec(spec)
    return "accepted"


# -- vocabulary files --------------------------------------------------------------------------
TINY_TOKENIZER = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3},
                            "merges": ["a b"]},
                  "added_tokens": [{"id": 4, "content": "</s>", "special": True}]}


def vocab_surface(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        data, suffix = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))), ""
    elif kind == 1:
        data = mutate(rng, json.dumps(TINY_TOKENIZER), '{}[]":,0123456789abĠ ').encode()
        suffix = ".json"
    elif kind == 2:
        lines = [f"{rng.choice(['YQ==', 'Yg==', '!!', ''])} {rng.choice(['0', '1', '-1', 'x'])}"
                 for _ in range(rng.randint(0, 5))]
        data, suffix = "\n".join(lines).encode(), ".tiktoken"
    else:
        data = b"GGUF" + bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        suffix = rng.choice([".gguf", ""])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"tok{suffix}"
        path.write_bytes(data)
        tether.Vocabulary.from_file(path)
    return "accepted"


# -- token ids ---------------------------------------------------------------------------------
def token_surface(rng: random.Random) -> str:
    compiled = tether.compile(tether.Regex("[a-c]{1,5}"), BYTES)
    m = compiled.matcher()
    for _ in range(rng.randint(1, 6)):
        token = rng.choice([97, 98, 99, 100, 256, 257, -1, 2**40, np.int64(98), 1.5, "a", None,
                            True])
        with contextlib.suppress(tether.TetherError):
            m.consume(token)  # type: ignore[arg-type]
    return "accepted"


# -- the command line --------------------------------------------------------------------------
CLI_WORDS = ["check", "compile", "--regex", "--schema", "--grammar", "--choices", "--text",
             "--vocab", "--json", "--seed", "--temperature", "--max-tokens", "--sampling",
             "--intensity", "--forbid", "--phase", "--extra-properties", "[a-z]+", "a,b",
             "", "abc", "-1", "nan", "python", "SCHEMA", "GRAMMAR", "VOCAB", "BINARY",
             "/nonexistent", "{", "\udcff", "--", "-x"]


def cli_surface(rng: random.Random) -> str:
    with tempfile.TemporaryDirectory() as folder:
        files = {"SCHEMA": Path(folder) / "s.json", "GRAMMAR": Path(folder) / "g.gbnf",
                 "VOCAB": Path(folder) / "tokenizer.json", "BINARY": Path(folder) / "b.bin"}
        files["SCHEMA"].write_text(json.dumps(mutate_schema({"type": "object", "properties": {
            "a": {"type": "integer"}}}, rng)))
        files["GRAMMAR"].write_text(mutate(rng, 'root ::= "a" [b-c]*', GRAMMAR_ALPHABET))
        files["VOCAB"].write_text(json.dumps(TINY_TOKENIZER))
        files["BINARY"].write_bytes(bytes(rng.randrange(256) for _ in range(64)))
        argv = [str(files.get(w, w)) for w in
                (rng.choice(["check", "compile"]),
                 *(rng.choice(CLI_WORDS) for _ in range(rng.randint(0, 6))))]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as e:  # argparse's usage errors: exit 2, one message
                status = e.code
        if status not in (0, 1, 2):
            raise Failure(f"tether {argv!r} exited {status}: {err.getvalue()[-300:]}")
        if "Traceback" in err.getvalue():
            raise Failure(f"tether {argv!r} printed a traceback")
    return "accepted"


SURFACES: dict[str, Callable[[random.Random], str]] = {
    "regex": regex_surface, "json-schema": schema_surface, "grammar": grammar_surface,
    "sampling-dsl": dsl_surface, "constraint-spec": spec_surface, "vocabulary": vocab_surface,
    "token-ids": token_surface, "cli": cli_surface,
}
