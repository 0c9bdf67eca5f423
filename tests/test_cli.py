"""The ``tether`` command line (SPEC §10): exit codes, stdout/stderr discipline."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tether
from tether.cli import main

SRC = str(Path(tether.__file__).resolve().parent.parent)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [SRC, *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run([sys.executable, "-m", "tether", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_check_match(capsys):
    assert main(["check", "--regex", r"\d{4}-\d{2}", "2024-05"]) == 0
    assert capsys.readouterr().out.strip() == "match"


def test_check_reports_byte_offset_and_caret(capsys):
    assert main(["check", "--regex", r"\d{4}-\d{2}", "2024-x5"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "byte 5" in lines[0]
    assert lines[2].index("^") == lines[1].index("2024-x5") + 5


def test_check_caret_counts_characters_not_bytes(capsys):
    assert main(["check", "--choices", "héllo,world", "hé!"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "byte 3" in lines[0]
    assert lines[2].index("^") == lines[1].index("hé!") + 2


def test_check_incomplete_text(capsys):
    assert main(["check", "--regex", r"\d{4}", "20"]) == 1
    assert "ends early" in capsys.readouterr().out


def test_typed_errors_exit_2_with_one_line(capsys):
    assert main(["check", "--regex", "(ab", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tether: error:") and err.count("\n") == 1
    assert main(["compile", "--regex", "a", "--vocab", "/no/such/tokenizer.json"]) == 2
    assert main(["generate", "--model", "/no/such/model.gguf", "hi"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_usage_errors_exit_2():
    with pytest.raises(SystemExit) as e:
        main(["check", "--regex", "a", "--choices", "a,b", "a"])
    assert e.value.code == 2


def test_compile_prints_stats(capsys, tmp_path):
    vocab = tmp_path / "tiny.tiktoken"
    vocab.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n"
                             for i, t in enumerate([b"a", b"b", b"ab", b"c"])))
    assert main(["compile", "--regex", "(ab)+", "--vocab", str(vocab)]) == 0
    out = capsys.readouterr().out
    assert "(4 tokens)" in out and "states:" in out and "time to first mask:" in out


@pytest.mark.model
def test_compile_with_the_embedded_vocabulary(capsys):
    assert main(["compile", "--choices", "yes,no"]) == 0
    out = capsys.readouterr().out
    assert "49152 tokens" in out and "time to first mask" in out


@pytest.mark.model
def test_generate_choices_prints_only_the_choice():
    pytest.importorskip("llama_cpp")
    choices = ["red", "green", "blue"]
    proc = run_cli("generate", "--choices", ",".join(choices), "--seed", "0",
                   "What colour is the sky on a clear day?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("\n") and proc.stdout[:-1] in choices  # the text, a newline
    assert "KL" in proc.stderr and "tokens/s" in proc.stderr


@pytest.mark.model
def test_generate_json():
    pytest.importorskip("llama_cpp")
    proc = run_cli("generate", "--regex", r"[0-9]{1,3}", "--json", "--temperature", "0",
                   "How many legs does a spider have?")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["text"].isdigit() and data["stop_reason"] in ("eog", "constraint_complete")
    assert len(data["kl"]) >= len(data["tokens"])
    assert data["kl_total"] >= 0 and data["tokens_per_s"] > 0


PERSON = {"type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer", "minimum": 0}},
          "required": ["name"]}


def test_check_schema_points_at_the_byte_and_the_keywords(tmp_path, capsys):
    schema = tmp_path / "person.json"
    schema.write_text(json.dumps(PERSON))
    assert main(["check", "--schema", str(schema), "--text", '{"name": "Al", "age": 3}']) == 0
    capsys.readouterr()
    assert main(["check", "--schema", str(schema), "--text", '{"name": "Al", "age": -3}']) == 1
    out = capsys.readouterr().out
    assert "fails at byte 23 (line 1, column 24)" in out
    assert "/properties/age" in out and "minimum" in out


def test_check_schema_reads_a_file(tmp_path, capsys):
    schema = tmp_path / "person.json"
    schema.write_text(json.dumps(PERSON))
    data = tmp_path / "data.json"
    data.write_text('{"age": 3}')
    assert main(["check", "--schema", str(schema), str(data)]) == 1
    assert "expected one of" in capsys.readouterr().out


def test_check_grammar_lark_and_gbnf(tmp_path, capsys):
    lark = tmp_path / "list.lark"
    lark.write_text('start: item ("," item)*\nitem: /[a-z]+/\n')
    assert main(["check", "--grammar", str(lark), "--text", "ab,c"]) == 0
    assert main(["check", "--grammar", str(lark), "--text", "ab,,c"]) == 1
    gbnf = tmp_path / "list.txt"
    gbnf.write_text('root ::= [a-z]+ ("," [a-z]+)*\n')
    assert main(["check", "--grammar", str(gbnf), "--syntax", "gbnf", "--text", "ab,c"]) == 0
    capsys.readouterr()


def test_check_ready_made_grammars_by_name(tmp_path, capsys):
    assert main(["check", "--grammar", "python", "--text", "def f():\n    return 1\n"]) == 0
    assert main(["check", "--grammar", "python", "--text", "def f():\nreturn 1\n"]) == 1
    block = "```python\nx = 1\n```\n"
    assert main(["check", "--grammar", "python-fenced", "--text", block]) == 0
    assert main(["check", "--grammar", "python-fenced", "--text", block + "More."]) == 1
    assert main(["check", "--grammar", "python", "--syntax", "lark", "--text", "x\n"]) == 2
    assert "./python" in capsys.readouterr().err
    own = tmp_path / "python"  # a file of that name is read with a path
    own.write_text('root ::= "x"\n')
    assert main(["check", "--grammar", str(own), "--text", "x"]) == 0


def test_bad_schema_and_grammar_are_located_errors(tmp_path, capsys):
    schema = tmp_path / "bad.json"
    schema.write_text('{"type": "string", "minLength": 5, "maxLength": 3}')
    assert main(["check", "--schema", str(schema), "--text", '"x"']) == 2
    assert "error" in capsys.readouterr().err
    grammar = tmp_path / "bad.lark"
    grammar.write_text('start: "a" (\n')
    assert main(["check", "--grammar", str(grammar), "--text", "a"]) == 2
    assert "1:" in capsys.readouterr().err
