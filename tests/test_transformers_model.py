"""The transformers logits processor with a real model: the embedded SmolLM2 dequantised
into a transformers checkpoint (:mod:`tether.runtime.hf_export`, built once into tether's
cache), ``model.generate`` on a left-padded batch of four Glaive function-call schemas,
one schema per row, greedy: every row's output validates against its own schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tether
from tether.errors import ModelError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("accelerate")  # transformers needs it to read a GGUF file

from tether.integrations.transformers import TetherLogitsProcessor  # noqa: E402
from tether.session.policy import compile_for_generation  # noqa: E402

GLAIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "glaive"
PROMPT = ("Call the function `{name}` with realistic arguments. "
          "Reply with the JSON arguments only.")
MAX_NEW_TOKENS = 128
# Four schemas of different shapes: a nested object of numbers; dates and an integer;
# four strings; an array of objects.
SCHEMAS = ["calculate_area_01d19dbe.json", "book_flight_22ba5334.json",
           "analyze_social_media_sentiment_6ef0069e.json",
           "calculate_discounted_price_4a4fc05e.json"]


@pytest.fixture(scope="module")
def hf_model():
    from tether.runtime.hf_export import export_embedded

    try:
        folder = export_embedded()
    except ModelError:
        pytest.skip("the embedded model is not installed")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = "left"
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return tokenizer, model.eval()


def glaive_schemas(n: int) -> list[tuple[str, dict]]:
    """``n`` schemas: the named ones, then the sorted rest (deterministic)."""
    if not GLAIVE.is_dir():
        pytest.skip("needs ../shared/data/glaive")
    names = SCHEMAS + [p.name for p in sorted(GLAIVE.glob("*.json")) if p.name not in SCHEMAS]
    return [(name.rsplit("_", 1)[0], json.loads((GLAIVE / name).read_text()))
            for name in names[:n]]


@pytest.mark.model
@pytest.mark.slow
def test_generate_a_batch_of_four_schemas(hf_model):
    tokenizer, model = hf_model
    vocab = tether.Vocabulary.from_tokenizer(tokenizer)
    schemas = glaive_schemas(4)
    compiled = [compile_for_generation(tether.JsonSchema(schema), vocab, "forbid")
                for _, schema in schemas]
    prompts = [tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT.format(name=name)}],
        tokenize=False, add_generation_prompt=True) for name, _ in schemas]
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    processor = TetherLogitsProcessor(compiled, max_tokens=MAX_NEW_TOKENS)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=MAX_NEW_TOKENS, do_sample=False,
                             logits_processor=transformers.LogitsProcessorList([processor]),
                             eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.eos_token_id)
    rows = out[:, batch["input_ids"].shape[1]:].tolist()
    for (name, schema), tokens, session in zip(schemas, rows, processor.sessions,
                                               strict=True):
        text = tokenizer.decode(tokens, skip_special_tokens=True)
        # the session saw every token but the last (generate ends before reporting it)
        assert text.startswith(session.text()), name
        jsonschema.validate(json.loads(text), schema)
