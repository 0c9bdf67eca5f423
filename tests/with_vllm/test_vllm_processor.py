"""tether's vLLM logits processor (:mod:`tether.integrations.vllm`), in ``.venv-vllm``
(``make test`` builds it; the main suite does not collect this folder).

The bookkeeping (rows added, moved, swapped, removed; tokens read from vLLM's output
lists) is driven directly; then a real engine — vLLM on CPU with the embedded SmolLM2,
dequantised (:mod:`tether.runtime.hf_export`), loaded once for the module — generates a
batch whose requests carry different constraints (JSON Schema, regex, choices, GBNF, none),
greedy: every output satisfies its own constraint, and a malformed spec fails its request
at admission.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
vllm = pytest.importorskip("vllm")
jsonschema = pytest.importorskip("jsonschema")

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.exceptions import VLLMValidationError  # noqa: E402
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality  # noqa: E402

import tether  # noqa: E402
from tether.errors import ModelError  # noqa: E402
from tether.integrations.vllm import TetherLogitsProcessor, parse_spec  # noqa: E402

GLAIVE = Path(__file__).resolve().parents[3] / "shared" / "data" / "glaive"
WORDS = b"constrained decoding"
PROCESSOR = "tether.integrations.vllm:TetherLogitsProcessor"
DATE = r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string", "maxLength": 20},
                         "days": {"type": "integer", "minimum": 1, "maximum": 14},
                         "unit": {"enum": ["celsius", "fahrenheit"]}},
          "required": ["city", "days", "unit"]}


@pytest.fixture(scope="module")
def model_dir() -> str:
    from tether.runtime.hf_export import export_embedded

    try:
        return str(export_embedded())
    except ModelError:
        pytest.skip("the embedded model is not installed")


# -- specs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [
    {"json_schema": SCHEMA}, {"json_schema": json.dumps(SCHEMA), "extra_properties": "spec"},
    {"regex": DATE}, {"choices": ["a", "b"]},
    {"grammar": 'root ::= "x" [0-9]+'}, {"grammar": 'start: "x"', "grammar_syntax": "lark"},
])
def test_good_specs_parse(spec):
    assert parse_spec(spec).constraint is not None


@pytest.mark.parametrize("spec", [
    "x", {}, {"regex": "a", "choices": ["a"]}, {"regex": "(unclosed"}, {"choices": "ab"},
    {"choices": []}, {"json_schema": "{not json"}, {"json_schema": 3}, {"grammar": "root ::= ("},
    {"regex": "a", "grammar_syntax": "gbnf"}, {"regex": "a", "extra_properties": "maybe"},
    {"regex": "a", "colour": "red"},
    {"json_schema": {"type": "object", "properties": {"a": {"type": "strin"}}}},
    {"json_schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                     "required": ["b"], "additionalProperties": False}},  # unsatisfiable
])
def test_bad_specs_are_value_errors(spec):
    with pytest.raises(ValueError):
        parse_spec(spec)
    with pytest.raises(ValueError):
        TetherLogitsProcessor.validate_params(SamplingParams(extra_args={"tether": spec}))


# -- bookkeeping without an engine ----------------------------------------------------------
def fake_config(model_dir: str) -> SimpleNamespace:
    return SimpleNamespace(model_config=SimpleNamespace(tokenizer=model_dir),
                           scheduler_config=SimpleNamespace(max_num_seqs=8))


def params(spec: dict | None, max_tokens: int = 32) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens,
                          extra_args=None if spec is None else {"tether": spec})


def allowed_ids(logits: torch.Tensor, row: int) -> set[int]:
    return set(torch.isfinite(logits[row]).nonzero().flatten().tolist())


def test_rows_follow_their_requests_through_moves_and_swaps(model_dir):
    proc = TetherLogitsProcessor(fake_config(model_dir), torch.device("cpu"), False)
    vocab = proc.vocab
    digits, letters = [], []
    proc.update_state(BatchUpdate(batch_size=3, removed=[], moved=[], added=[
        (0, params({"regex": r"[0-9]+"}), [1], digits),
        (1, params(None), [1], []),
        (2, params({"choices": [WORDS.decode()]}), [1], letters)]))
    width = vocab.size + 64  # a padded model head
    logits = proc.apply(torch.zeros(3, width))
    digit_ids = {t for t in range(vocab.size) if vocab.token_bytes(t).isdigit()}
    assert allowed_ids(logits, 0) == digit_ids
    assert torch.isfinite(logits[1]).all()  # no tether spec: untouched
    assert all(vocab.token_bytes(t) and WORDS.startswith(vocab.token_bytes(t))
               for t in allowed_ids(logits, 2))
    # the rows generate, then swap places; the unconstrained row leaves
    digits.append(next(iter(digit_ids)))
    letters.append(vocab.segment(WORDS)[0])
    proc.update_state(BatchUpdate(batch_size=2, removed=[1], added=[], moved=[
        (2, 1, MoveDirectionality.UNIDIRECTIONAL), (0, 1, MoveDirectionality.SWAP)]))
    logits = proc.apply(torch.zeros(2, width))
    assert allowed_ids(logits, 1) == digit_ids | {t for t in range(vocab.size)
                                                  if vocab.is_eos(t)}
    rest = WORDS[len(vocab.token_bytes(letters[0])):]
    assert rest and all(vocab.token_bytes(t) and rest.startswith(vocab.token_bytes(t))
                        for t in allowed_ids(logits, 0))
    assert proc.rows[0].seen == 1 and proc.rows[1].seen == 1


def test_an_uncompilable_constraint_leaves_its_row_alone(model_dir):
    proc = TetherLogitsProcessor(fake_config(model_dir), torch.device("cpu"), False)
    impossible = {"json_schema": {"type": "integer", "minimum": 5, "maximum": 1}}
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                  added=[(0, params(impossible), [1], [])]))
    assert torch.isfinite(proc.apply(torch.zeros(1, proc.vocab.size))).all()


# -- a real engine --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def llm(model_dir):
    engine = vllm.LLM(model=model_dir, dtype="float32", max_model_len=2048, enforce_eager=True,
                      logits_processors=[PROCESSOR], seed=0)
    yield engine
    del engine


def chat(llm, text: str) -> str:
    return llm.get_tokenizer().apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)


@pytest.mark.model
@pytest.mark.slow
def test_a_batch_of_different_constraints(llm):
    flight = json.loads((GLAIVE / "book_flight_22ba5334.json").read_text()) \
        if GLAIVE.is_dir() else SCHEMA
    cases = [
        ("Book a flight. Reply with the JSON arguments only.", {"json_schema": flight},
         lambda t: jsonschema.validate(json.loads(t), flight) is None),
        ("What's the weather like in Paris next week? Answer in JSON.",
         {"json_schema": SCHEMA}, lambda t: jsonschema.validate(json.loads(t), SCHEMA) is None),
        ("When did the Apollo 11 landing happen? Answer with a date.", {"regex": DATE},
         lambda t: re.fullmatch(DATE, t) is not None),
        ("Name a primary colour.", {"choices": ["red", "yellow", "blue"]},
         lambda t: t in ("red", "yellow", "blue")),
        ("How many apples?", {"grammar": 'root ::= [1-9] [0-9]? " apples"'},
         lambda t: re.fullmatch(r"[1-9][0-9]? apples", t) is not None),
        ("Write a date.", {"regex": r"\d{4}"}, lambda t: re.fullmatch(r"\d{4}", t) is not None),
        ("Say hello.", None, lambda t: isinstance(t, str)),
    ]
    prompts = [chat(llm, text) for text, _, _ in cases]
    sampling = [SamplingParams(temperature=0.0, max_tokens=96,
                               extra_args=None if spec is None else {"tether": spec})
                for _, spec, _ in cases]
    outputs = llm.generate(prompts, sampling, use_tqdm=False)
    for (_, spec, check), out in zip(cases, outputs, strict=True):
        result = out.outputs[0]
        if spec is not None:
            assert result.finish_reason == "stop", (spec, result.text)
        assert check(result.text), (spec, result.text)


@pytest.mark.model
def test_a_malformed_spec_fails_its_request(llm):
    with pytest.raises(VLLMValidationError, match="unterminated"):  # HTTP 400 when served
        llm.generate([chat(llm, "hi")],
                     SamplingParams(max_tokens=4, extra_args={"tether": {"regex": "("}}),
                     use_tqdm=False)
    out = llm.generate([chat(llm, "hi")], SamplingParams(
        max_tokens=8, temperature=0.0, extra_args={"tether": {"choices": ["ok"]}}),
        use_tqdm=False)
    assert out[0].outputs[0].text == "ok"  # the engine is still serving


def test_the_exported_vocabulary_matches_the_gguf(model_dir):
    from tether.runtime import embedded_model_path

    exported = TetherLogitsProcessor(fake_config(model_dir), torch.device("cpu"), False).vocab
    gguf = tether.Vocabulary.from_file(embedded_model_path())
    assert exported.size == gguf.size
    assert all(exported.token_bytes(t) == gguf.token_bytes(t) for t in range(0, gguf.size, 7))
