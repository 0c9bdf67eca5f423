"""Fusion wired into `generate()` and the CLI (SPEC §7, §9, §10): extra hard domains,
intensity, relaxation, phases and the per-step / per-run diagnostics. A fake model pins
down the logic; the embedded model checks the Phases bar; the CLI runs as a subprocess."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from test_cli import run_cli
from test_generate import CONTROL, EOS, TOKENS, FakeModel, favour

import tether
from tether.errors import TetherError
from tether.fusion import Domain, FusionConfig, IntensityLevel, LexiconScorer, forbid_words
from tether.runtime import generate
from tether.sampling import Pipeline

GREEDY = Pipeline(temperature=0)


WIRING_TOKENS = [*TOKENS, b"\n", b"```", b"json", b"\n{", b"think"]


class ScriptedModel(FakeModel):
    """A fake model (with line breaks and fence tokens) that spells out a script: at
    each step the scripted token gets logit 12, an optional runner-up 6."""

    def __init__(self, *script: bytes, runner_up: dict[int, bytes] | None = None) -> None:
        super().__init__()
        self.vocab = tether.Vocabulary(WIRING_TOKENS, special_ids=[CONTROL], eos_ids=[EOS])
        self.ids = {t: i for i, t in enumerate(WIRING_TOKENS) if i > CONTROL}
        self.script = [WIRING_TOKENS.index(t) for t in script]
        self.runner_up = runner_up or {}
        self.prefer = self._prefer

    def _prefer(self, history):
        x = np.zeros(len(WIRING_TOKENS), dtype=np.float32)
        done = len(history) - len(self.tokenize(b"q?"))
        x[self.script[done] if done < len(self.script) else EOS] = 12.0
        if done in self.runner_up:
            x[WIRING_TOKENS.index(self.runner_up[done])] = 6.0
        return x


# -- hard domains and intensity ------------------------------------------------------------
def test_imports_forbid_words_prevents_a_word():
    model = FakeModel(favour(b"hello", b" world"))
    free = generate("q?", model=model, max_tokens=4, sampling=GREEDY)
    assert "hello" in free.text
    result = generate("q?", model=model, max_tokens=4, sampling=GREEDY,
                      imports=forbid_words(model.vocab, ["hello"]))
    assert "hello" not in re.findall(r"\w+", result.text)
    assert result.text and all(s.phase == "structured_output" for s in result.kl)
    assert all("imports" in s.domain_us for s in result.kl)


def test_intensity_none_is_unconstrained():
    model = FakeModel(favour(b"hello"))
    config = FusionConfig(intensity=IntensityLevel.NONE)
    result = generate("q?", "[0-9]+", model=model, max_tokens=3, sampling=GREEDY,
                      fusion=config)
    assert result.text == "hellohellohello" and result.stop_reason == "budget"
    assert all(s.domain_us == {} for s in result.kl)


def test_types_constraint_intersects_with_syntax():
    model = FakeModel(favour(b"a", b"b"))
    result = generate("q?", "[ab]{3}", model=model, sampling=GREEDY, types="b+")
    assert result.text == "bbb" and result.stop_reason == "constraint_complete"


def test_relaxation_is_reported_in_the_diagnostics():
    model = FakeModel(favour(b"a"))
    result = generate("q?", "[ac]{2}", model=model, sampling=GREEDY, types="b+")
    assert result.text == "aa"
    assert [s.dropped for s in result.kl] == [("types",), ()]  # then Types is lost
    assert result.summary.n_relaxed == 1
    assert result.to_dict()["kl"][0]["dropped"] == ["types"]


def test_soft_scores_steer_but_kl_is_against_the_model():
    model = FakeModel(favour(b"yes", b"no"))
    lexicon = LexiconScorer(model.vocab, {"no": 1.0})
    result = generate("q?", "yes|no", model=model, sampling=GREEDY,
                      soft={Domain.SEMANTICS: lexicon})
    plain = generate("q?", "yes|no", model=model, sampling=GREEDY)
    assert plain.text == "yes" and result.text == "no"  # ties go to the lowest id
    assert result.kl[0].kl == pytest.approx(plain.kl[0].kl, abs=1e-6)
    assert result.kl[0].feasible == plain.kl[0].feasible


def test_beam_programs_refuse_fusion():
    with pytest.raises(TetherError, match="beam"):
        generate("q?", "[ab]+", model=FakeModel(), sampling="beam 2", types="a+")


def test_phase_must_be_auto_or_off():
    with pytest.raises(TetherError, match="phase"):
        generate("q?", model=FakeModel(), phase="on")


# -- diagnostics ---------------------------------------------------------------------------
def test_diagnostics_are_present_and_consistent():
    model = FakeModel(favour(b"1", b"2"))
    result = generate("q?", "[0-9]{2,6}", model=model, max_tokens=8, seed=3,
                      sampling=Pipeline(temperature=1.0), imports=forbid_words(model.vocab,
                                                                               ["12"]))
    data = result.to_dict()
    sampled = [s for s in result.kl if s.kl is not None]
    assert sampled
    for s in sampled:
        assert s.kl >= 0 and s.mass == pytest.approx(math.exp(-s.kl))
        assert 0 < s.mass <= 1 and s.feasible >= 1 and s.log_z == -s.kl
        assert set(s.domain_us) >= {"syntax", "imports"}
    assert data["kl_total"] == pytest.approx(math.fsum(s.kl for s in sampled))
    assert data["log_p_estimate"] == pytest.approx(math.fsum(s.log_z for s in sampled))
    assert data["kl_mean"] == pytest.approx(data["kl_total"] / len(sampled))
    assert data["kl_max"] == max(s.kl for s in sampled)
    assert data["kl_max_step"] == max(range(len(result.kl)),
                                      key=lambda i: result.kl[i].kl or -1)
    assert data["fights"][0] == data["kl_max_step"]
    for key in ("kl", "log_z", "mass", "feasible", "forced", "dropped", "domain_us"):
        assert key in data["kl"][0]


def test_plain_runs_report_eog_and_summary():
    model = FakeModel(favour(b"n", eos=10.0))
    result = generate("q?", tether.Choices(["no", "nope"]), model=model, sampling=GREEDY)
    assert result.stop_reason == "eog"
    assert result.to_dict()["log_p_estimate"] == pytest.approx(-result.kl_total)


# -- phases --------------------------------------------------------------------------------
PROSE = (b"hello", b" world", b"{", b"\n")  # prose with a brace: never blocked
JSON_A = r'\{"a": [0-9]\}'


def test_phase_auto_leaves_prose_free_and_constrains_after_the_fence():
    model = ScriptedModel(*PROSE, b"```", b"json", b"\n")  # then only end of generation
    result = generate("q?", JSON_A, model=model, sampling=GREEDY, phase="auto")
    assert result.text == 'hello world{\n```json\n{"a": 0}'
    assert result.stop_reason == "constraint_complete"
    phases = [s.phase for s in result.kl]
    assert phases[:7] == ["reasoning"] * 7 and phases[-1] == "structured_output"


def test_a_token_straddling_the_fence_carries_its_bytes_into_the_constraint():
    model = ScriptedModel(b"hello", b"```", b"json", b"\n{")
    result = generate("q?", JSON_A, model=model, sampling=GREEDY, phase="auto")
    assert result.text == 'hello```json\n{"a": 0}'
    assert result.kl[3].phase == "reasoning" and result.kl[4].phase == "structured_output"


def test_a_straddling_token_the_constraint_rejects_is_not_taken():
    model = ScriptedModel(b"```", b"json", b"\n{", runner_up={2: b"\n"})
    result = generate("q?", "yes|no", model=model, sampling=GREEDY, phase="auto")
    assert result.text in ("```json\nyes", "```json\nno")


def test_phase_auto_think_block_then_constrained_answer():
    model = ScriptedModel(b"<", b"think", b">", b"no", b"no", b"<", b"/", b"think", b">",
                          b"yes")
    result = generate("q?", "yes|no", model=model, sampling=GREEDY, phase="auto")
    assert result.text == "<think>nono</think>yes"


def test_a_fence_the_model_writes_is_not_written_again():
    """With a constraint that starts with the fence itself (a fenced grammar), the fence
    that opened the structured part is the constraint's own."""
    model = ScriptedModel(*PROSE, b"```", b"json", b"\n")
    fenced = r'```json\n\{"a": [0-9]\}\n```'
    result = generate("q?", fenced, model=model, sampling=GREEDY, phase="auto")
    assert result.text == 'hello world{\n```json\n{"a": 0}\n```'
    assert tether.compile(tether.Regex(fenced), model.vocab).check(
        result.text.split("{\n", 1)[1]).matches


def test_phase_off_constrains_from_the_start():
    model = ScriptedModel(*PROSE)
    result = generate("q?", JSON_A, model=model, sampling=GREEDY,
                      fusion=FusionConfig(intensity="syntax_only"))
    assert result.text.startswith('{"a') and result.kl[0].phase == "structured_output"


# -- the embedded model: the Phases bar ------------------------------------------------------
ANSWER = r'\{"answer": (true|false)\}'
PERSON = r'\{"name": "[A-Za-z ]{1,20}", "age": [0-9]{1,3}\}'


@pytest.fixture(scope="module")
def smollm2(smollm2_gguf):
    return tether.runtime.load_model(smollm2_gguf)


class Prefixed:
    """The model with a short assistant prefix after the chat prompt (it seeds the
    reasoning; the detector and the constraint only see what is generated)."""

    def __init__(self, model, prefix: str) -> None:
        self.model, self.prefix = model, prefix

    def __getattr__(self, name):
        return getattr(self.model, name)

    def chat_prompt(self, prompt: str, system: str | None = None):
        return self.model.chat_prompt(prompt, system) + self.model.tokenize(
            self.prefix.encode())


PERSON_SHOT = ('Example:\nText: Bob is 41.\nBob is a man of 41.\n```json\n'
               '{"name": "Bob", "age": 41}\n```\n\nText: Alice is 30.')
THINK_SHOT = ('Example:\nQ: Is fire cold?\nA: <think>Fire is hot.</think>{"answer": false}'
              '\n\nQ: Is ice cold?')


@pytest.mark.model
@pytest.mark.parametrize("prompt, pattern, prefix, opener", [
    (PERSON_SHOT, PERSON, "", "```json\n"),
    (PERSON_SHOT, PERSON, "Alice", "```json\n"),
    (THINK_SHOT, ANSWER, "<think>", "</think>"),
])
def test_phases_bar_prose_is_free_and_json_satisfies_the_constraint(smollm2, prompt, pattern,
                                                                     prefix, opener):
    result = generate(prompt, pattern, model=Prefixed(smollm2, prefix), max_tokens=100,
                      phase="auto", sampling=GREEDY,
                      fusion=FusionConfig(intensity="syntax_only"))
    prose, found, structured = result.text.partition(opener)
    assert found, result.text
    assert re.search(r"[A-Za-z]{3,} ", prose), result.text  # real prose came first
    assert re.fullmatch(pattern, structured), result.text
    assert result.stop_reason == "constraint_complete"
    reasoning = [s for s in result.kl if s.phase == "reasoning"]
    assert reasoning and all(s.feasible >= smollm2.vocab.size - 64 for s in reasoning)


# -- the CLI -------------------------------------------------------------------------------------
@pytest.mark.model
def test_cli_explain_prints_a_table_and_a_summary():
    out = run_cli("explain", "--regex", r"(yes|no)\.", "--temperature", "0",
                  "--forbid", "yes,no", "Is the sky blue? Answer yes or no.")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:5] == ["step", "token", "kind", "phase", "feasible"]
    assert lines[-1].startswith("summary:") and "log p(L)" in lines[-1]
    assert "Σ KL" in lines[-1] and "1 relaxed" in lines[-1]
    assert any("syntax=" in line and "imports=" in line for line in lines[1:-1])
    # both words are forbidden: the period that closes one needs Imports dropped
    assert [line.split()[1] for line in lines[1:-1] if " imports " in line] == ["'.'"]


@pytest.mark.model
def test_cli_explain_json_and_phase_auto():
    out = run_cli("explain", "--json", "--regex", r"\{\"answer\": (true|false)\}",
                  "--phase", "auto", "--temperature", "0", "--max-tokens", "100", THINK_SHOT)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["kl"][0]["phase"] == "reasoning"
    assert re.search(r'</think>\{"answer": (true|false)\}$', data["text"]), data["text"]
    assert data["log_p_estimate"] == pytest.approx(-data["kl_total"])


@pytest.mark.model
def test_cli_generate_with_intensity_and_constraint_spec(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"regex": "[0-9]{3}", "intensity": "full_hard"}))
    out = run_cli("generate", "--constraint-spec", str(spec), "--types", "[0-4]+",
                  "--temperature", "0", "Pick a number.")
    assert out.returncode == 0, out.stderr
    assert re.fullmatch("[0-4]{3}", out.stdout.strip()), out.stdout
    free = run_cli("generate", "--regex", "[0-9]{3}", "--intensity", "none",
                   "--max-tokens", "5", "--temperature", "0", "--json", "Say hi.")
    assert free.returncode == 0 and not json.loads(free.stdout)["text"].isdigit()


@pytest.mark.parametrize("spec, key", [
    ({"regex": "a", "intensty": "full"}, "intensty"),
    ({"json_schema": {"type": "object"}}, "json_schema"),
    ({"intensity": "loud"}, "intensity"),
])
def test_cli_constraint_spec_errors_name_the_key(tmp_path, spec, key):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = run_cli("generate", "--constraint-spec", str(path), "hi", timeout=60)
    assert out.returncode == 2 and key in out.stderr
    assert out.stderr.startswith("tether: error:") and out.stderr.count("\n") == 1


def test_cli_rejects_bad_fusion_flags():
    out = run_cli("generate", "--intensity", "loud", "hi", timeout=60)
    assert out.returncode == 2 and "--intensity" in out.stderr
    out = run_cli("explain", "--imports", "a", "--forbid", "b", "hi", timeout=60)
    assert out.returncode == 2 and "not allowed with" in out.stderr
