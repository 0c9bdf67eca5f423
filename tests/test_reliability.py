"""Bad input gets a typed error naming the place, never a traceback (docs: errors are
``TetherError`` subclasses in the API, one line and exit code 2 in the CLI)."""

from __future__ import annotations

import math

import pytest
from test_cli import run_cli

import tether
from tether.cli import _byte_vocabulary, main
from tether.sampling import Pipeline
from tether.session import decider

BYTES = _byte_vocabulary()


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
