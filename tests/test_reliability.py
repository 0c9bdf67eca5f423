"""Bad input gets a typed error naming the place, never a traceback (docs: errors are
``TetherError`` subclasses in the API, one line and exit code 2 in the CLI)."""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from test_cli import SRC, run_cli

import tether
from tether.cli import main
from tether.sampling import Pipeline
from tether.session import decider
from tether.vocab import Vocabulary

BYTES = Vocabulary.of_bytes()
_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [SRC, *filter(None, [os.environ.get("PYTHONPATH")])]))


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_sampling_settings_are_refused(value: float) -> None:
    with pytest.raises(tether.TetherError, match="finite"):
        Pipeline(temperature=value)
    with pytest.raises(tether.TetherError, match="finite"):
        decider(BYTES, temperature=value)


def test_negative_seed_is_refused() -> None:
    with pytest.raises(tether.TetherError, match="seed"):
        decider(BYTES, seed=-1)


@pytest.mark.parametrize("options", ["yes", ["a", "", "b"], [""]])
def test_choices_need_real_options(options) -> None:
    with pytest.raises(tether.CompileError):
        tether.Choices(options)


@pytest.mark.parametrize("choices", ["", "a,,b"])
def test_cli_choices_need_real_options(choices: str, capsys) -> None:
    assert main(["check", "--choices", choices, "a"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tether: error: choice") and err.count("\n") == 1


def test_compile_says_what_it_takes() -> None:
    with pytest.raises(tether.CompileError, match="tether.JsonSchema"):
        tether.compile({"type": "string"}, BYTES)  # type: ignore[arg-type]
    with pytest.raises(tether.TetherError, match="Vocabulary"):
        tether.compile(tether.Regex("a"), "tokenizer.json")  # type: ignore[arg-type]


@pytest.mark.parametrize("args", [["--temperature", "inf"], ["--seed", "-1"]])
def test_cli_generation_settings_are_checked(args: list[str]) -> None:
    proc = run_cli("generate", "--regex", "[a-z]+", *args, "x")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "tether: error:" in proc.stderr


# -- the reproductions -------------------------------------------------------------
def _nested_objects(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_deep_schema_documents_are_refused_with_a_pointer() -> None:
    deep = _nested_objects(500)  # 1000 nested JSON objects: past Python's json recursion
    with pytest.raises(tether.LimitExceeded) as e:
        tether.JsonSchema(deep)
    assert str(e.value.location).startswith("/properties/a/properties/a")
    text = "{" + '"not": {' * 600 + "}" * 601
    with pytest.raises(tether.LimitExceeded) as e:
        tether.JsonSchema(text)
    assert e.value.location == "1:2049"  # the 257th brace: 1 + 8 * 256


def test_deep_schema_file_in_the_cli(tmp_path, capsys) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"properties": {"a": ' * 400 + "{}" + "}}" * 400)
    assert main(["check", "--schema", str(path), "--text", "{}"]) == 2
    assert "nests deeper than" in capsys.readouterr().err


@pytest.mark.parametrize("text, pointer", [
    ('{"properties": {"\\ud800": {"type": "string"}}}', "/properties/\\ud800"),
    ('{"enum": ["ok", "a\\udfff"]}', "/enum/1"),
])
def test_lone_surrogates_are_refused_at_their_pointer(text: str, pointer: str, tmp_path,
                                                      capsys) -> None:
    """JSON's "\\ud800" escape reads as a lone surrogate, which no UTF-8 text holds: a
    compile error at its place, not a UnicodeEncodeError from deep inside a compile."""
    with pytest.raises(tether.CompileError) as e:
        tether.JsonSchema(text)
    assert e.value.location == pointer and "lone surrogate" in e.value.message
    path = tmp_path / "schema.json"
    path.write_text(text)
    assert main(["check", "--schema", str(path), "--text", "{}"]) == 2
    assert "lone surrogate" in capsys.readouterr().err


def test_deeply_nested_regex_groups_are_a_limit_at_their_column(capsys) -> None:
    pattern = "(" * 300 + "a" + ")" * 300
    with pytest.raises(tether.LimitExceeded) as e:
        tether.compile(tether.Regex(pattern), BYTES)
    assert e.value.location == 101
    assert main(["check", "--regex", pattern, "a"]) == 2
    assert "groups nest deeper than 100 at column 101" in capsys.readouterr().err
    assert tether.compile(tether.Regex("(" * 99 + "a" + ")" * 99), BYTES).check("a").matches


def test_check_survives_closed_and_binary_stdin() -> None:
    closed = subprocess.run([sys.executable, "-m", "tether", "check", "--regex", "[a-z]+"],
                            stdin=subprocess.DEVNULL, capture_output=True, env=_ENV)
    assert closed.returncode == 1  # empty input: does not match
    binary = subprocess.run([sys.executable, "-m", "tether", "check", "--regex", "[a-z]+"],
                            input=bytes(range(256)), capture_output=True, env=_ENV)
    assert binary.returncode == 1 and b"Traceback" not in binary.stderr
    assert b"fails at byte 0" in binary.stdout
    no_stdin = subprocess.run(
        [sys.executable, "-c", "import sys; sys.stdin.close(); sys.stdin = None; "
         "from tether.cli import main; sys.exit(main(['check', '--regex', 'a']))"],
        capture_output=True, env=_ENV)
    assert no_stdin.returncode == 2 and b"stdin is closed" in no_stdin.stderr


def test_check_survives_a_full_or_closed_stdout() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "tether", "check", "--regex", "a", "a"],
                              stdout=full, stderr=subprocess.PIPE, env=_ENV)
    assert done.returncode == 2 and b"No space left" in done.stderr
    assert b"Traceback" not in done.stderr
    closed = subprocess.run(
        [sys.executable, "-c", "import sys; sys.stdout = None; "
         "from tether.cli import main; sys.exit(main(['check', '--regex', 'a', 'a']))"],
        capture_output=True, env=_ENV)
    assert closed.returncode == 2 and b"stdout is closed" in closed.stderr


def test_a_bug_is_one_line_and_exit_3(monkeypatch, capsys) -> None:
    def broken(*_args, **_kwargs):
        raise KeyError("boom")

    monkeypatch.setattr("tether.cli.compile_constraint", broken)
    assert main(["check", "--regex", "a", "a"]) == 3
    err = capsys.readouterr().err
    assert "This is a bug in tether" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("schema", "text"), [
    ({"type": "number", "multipleOf": 0.5}, "1e2"),
    ({"type": "number", "multipleOf": 0.5}, "15e-1"),
    ({"type": "number", "multipleOf": 1e-300}, "1e-300"),
    ({"type": "number", "maximum": 1e200}, "5"),
])
def test_numbers_answer_as_jsonschema(schema, text) -> None:
    assert tether.compile(tether.JsonSchema(schema), BYTES).check(text).matches


def test_check_names_the_missing_required_property(tmp_path, capsys) -> None:
    path = tmp_path / "person.json"
    path.write_text('{"type": "object", "properties": {"name": {"type": "string", '
                    '"minLength": 1}, "age": {"type": "integer"}}, "required": ["name", "age"]}')
    assert main(["check", "--schema", str(path), "--text", '{"name": "x"}']) == 1
    out = capsys.readouterr().out
    assert "schema at /required: missing 'age'" in out
    assert "/properties/name" not in out and "inside:" not in out


def test_check_shows_a_window_of_a_long_input(capsys) -> None:
    text = "a" * 20_000 + "1" + "b" * 20_000
    assert main(["check", "--regex", "[a-z]+", text]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) < 100 for line in lines[:3])
    assert lines[2].index("^") == lines[1].index("1")


def test_a_huge_enum_is_refused_at_once_at_its_pointer() -> None:
    schema = {"enum": [f"value-{i:05d}-" + "x" * 200 for i in range(20_000)]}
    started = time.perf_counter()
    with pytest.raises(tether.LimitExceeded) as e:
        tether.compile(tether.JsonSchema(schema), BYTES)
    assert e.value.location == "/enum" and "20000 values" in str(e.value)
    assert time.perf_counter() - started < 10


def test_an_unknown_file_is_not_read_as_sentencepiece(tmp_path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello notes\n")
    with pytest.raises(tether.VocabularyError, match="not a tokenizer file"):
        tether.Vocabulary.from_file(notes)


def test_a_first_run_says_numba_is_compiling(tmp_path) -> None:
    env = dict(_ENV, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    done = subprocess.run([sys.executable, "-c", "import tether"], capture_output=True,
                          text=True, env=env, timeout=600)
    assert "first run" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    again = subprocess.run([sys.executable, "-c", "import tether"], capture_output=True,
                           text=True, env=env, timeout=600)
    assert again.stderr == ""


# -- what the fuzz campaign found ------------------------------------------------------------
def test_a_mask_of_the_wrong_shape_is_refused_or_packed() -> None:
    """A bool mask used to overrun a numba buffer (heap corruption)."""
    from tether.sampling import parse_program

    logits = np.zeros(32, dtype=np.float32)
    program = parse_program("sample")
    bools = np.zeros(32, dtype=bool)
    bools[[3, 7]] = True
    for seed in range(5):
        step = program.sample(logits, bools, rng=np.random.default_rng(seed))
        assert step.token in (3, 7)
    with pytest.raises(tether.TetherError, match="mask"):
        program.sample(logits, np.ones(3, dtype=np.uint32))  # allows ids past the row
    with pytest.raises(tether.TetherError, match="mask"):
        program.sample(logits, np.ones(1, dtype=np.float32))


@pytest.mark.parametrize("token", [None, "a", 1.5, True])
def test_a_token_id_must_be_an_integer(token) -> None:
    m = tether.compile(tether.Regex("[a-c]+"), BYTES).matcher()
    with pytest.raises(tether.TokenIdError):
        m.consume(token)
    m.consume(np.int64(97))
    assert m.generated_bytes == b"a"


def test_a_comment_does_not_take_the_quantifier() -> None:
    compiled = tether.compile(tether.Regex(r"\.(?#three dots){3}"), BYTES)
    assert compiled.check("...").matches and not compiled.check(".").matches


@pytest.mark.parametrize("schema", [{"maxLength": 1e200}, {"type": "string", "minLength": 10**30},
                                    {"type": "array", "minItems": 10**20}])
def test_huge_counts_are_refused_quickly(schema) -> None:
    started = time.perf_counter()
    with pytest.raises(tether.LimitExceeded):
        tether.compile(tether.JsonSchema(schema), BYTES)
    assert time.perf_counter() - started < 5


def test_a_finite_string_language_ignores_a_huge_max_length() -> None:
    schema = {"type": "string", "pattern": "^a{0,3}$", "maxLength": 10**9}
    assert tether.compile(tether.JsonSchema(schema), BYTES).check('"aaa"').matches


def test_a_type_list_with_a_non_string_names_its_place() -> None:
    with pytest.raises(tether.CompileError) as e:
        tether.compile(tether.JsonSchema({"type": ["string", ["x"]]}), BYTES)
    assert e.value.location == "/type/1"


def test_a_highly_ambiguous_grammar_is_bounded() -> None:
    grammar = tether.Grammar('root ::= e\ne ::= e e | e "+" e | "(" e ")" | [a-z]')
    m = tether.compile(grammar, BYTES).matcher()
    text = b"ab(c+d)e" * 40
    started = time.perf_counter()
    with contextlib.suppress(tether.LimitExceeded):  # "too ambiguous here", or it fits
        for b in text:
            m.mask()
            m.consume(b)
    assert time.perf_counter() - started < 60
