"""The transformers logits processor with a tiny random-weights GPT-2 built from a config
(no downloads): every row of a batch stays inside the constraint."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tether
from tether.errors import TetherError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tether.integrations.transformers import TetherLogitsProcessor  # noqa: E402

EOS = 0
VOCAB = tether.Vocabulary(
    [b"", *(bytes([b]) for b in range(32, 127)), b"ab", b"abc", b" x", b"12", b"2024", b"-0"],
    eos_ids=[EOS])


def tiny_model(vocab_size: int, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=64,
                                     vocab_size=vocab_size, eos_token_id=EOS,
                                     bos_token_id=EOS, pad_token_id=EOS)
    return transformers.GPT2LMHeadModel(config).eval()


def run(processor, model, prompts, **kwargs):
    input_ids = torch.as_tensor(prompts, dtype=torch.long)
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
            logits_processor=transformers.LogitsProcessorList([processor]),
            eos_token_id=EOS, pad_token_id=EOS, **kwargs)
    return out[:, input_ids.shape[1]:].tolist()


def raw_text(tokens: list[int], vocab: tether.Vocabulary) -> tuple[bytes, bool]:
    """The bytes before the first end of generation, and whether one was produced."""
    stop = next((i for i, t in enumerate(tokens) if vocab.is_eos(t)), None)
    body = tokens if stop is None else tokens[:stop]
    return b"".join(vocab.token_bytes(t) for t in body), stop is not None


def text_of(tokens: list[int], vocab: tether.Vocabulary) -> tuple[str, bool]:
    data, stopped = raw_text(tokens, vocab)
    return data.decode(), stopped


@pytest.mark.parametrize("pattern", [r"\d{4}-\d{2}", r"(abc|x)+ ok", r"[a-f]{1,6}!"])
@pytest.mark.parametrize("do_sample", [False, True])
def test_every_row_matches(pattern, do_sample):
    model = tiny_model(VOCAB.size)
    compiled = tether.compile(tether.Regex(pattern), VOCAB)
    processor = TetherLogitsProcessor(compiled)
    prompts = np.random.default_rng(1).integers(1, VOCAB.size, size=(4, 5))
    rows = run(processor, model, prompts, max_new_tokens=24, do_sample=do_sample,
               **({"top_k": 0, "temperature": 1.5} if do_sample else {}))
    for tokens, matcher in zip(rows, processor.matchers, strict=True):
        data, stopped = raw_text(tokens, VOCAB)
        if stopped:
            assert re.fullmatch(pattern, data.decode()) and matcher.is_accepting()
        else:  # out of budget: still a viable prefix
            assert len(tokens) == 24 and compiled.check(data).valid_prefix == len(data)


def test_padded_model_head_never_picks_ids_past_the_vocabulary():
    model = tiny_model(VOCAB.size + 28, seed=3)
    with torch.no_grad():  # make the padding ids the model's favourites
        model.lm_head.weight[VOCAB.size:] *= 50
    processor = TetherLogitsProcessor(tether.compile(tether.Choices(["abc", "12"]), VOCAB))
    rows = run(processor, model, [[5, 6, 7]] * 3, max_new_tokens=8, do_sample=False)
    for tokens in rows:
        assert max(tokens) < VOCAB.size
        assert text_of(tokens, VOCAB) in (("abc", True), ("12", True))


def test_one_matcher_per_row_from_a_list():
    compiled = tether.compile(tether.Regex(r"\d{2}"), VOCAB)
    matchers = [compiled.matcher(), compiled.matcher()]
    rows = run(TetherLogitsProcessor(matchers), tiny_model(VOCAB.size), [[3, 4], [5, 6]],
               max_new_tokens=6, do_sample=True)
    assert all(re.fullmatch(r"\d{2}", text_of(r, VOCAB)[0]) for r in rows)
    assert all(m.is_accepting() for m in matchers)  # the final EOS is never fed back


def test_reusing_a_processor_is_a_clear_error():
    processor = TetherLogitsProcessor(tether.compile(tether.Regex("a{1,3}"), VOCAB))
    model = tiny_model(VOCAB.size)
    run(processor, model, [[3, 4]], max_new_tokens=4)
    with pytest.raises(TetherError):
        run(processor, model, [[3, 4]], max_new_tokens=4)


def test_batch_size_must_match_the_matchers():
    compiled = tether.compile(tether.Regex("a"), VOCAB)
    with pytest.raises(TetherError):
        run(TetherLogitsProcessor([compiled.matcher()]), tiny_model(VOCAB.size),
            [[3], [4]], max_new_tokens=2)


def test_with_the_smollm2_vocabulary():
    from tether.errors import ModelError
    from tether.runtime import embedded_model_path

    try:
        vocab = tether.Vocabulary.from_file(embedded_model_path())
    except ModelError:
        pytest.skip("the embedded model is not installed")
    model = tiny_model(vocab.size)
    pattern = r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
    processor = TetherLogitsProcessor(tether.compile(tether.Regex(pattern), vocab))
    rows = run(processor, model, [[1, 2, 3]] * 2, max_new_tokens=40, do_sample=True,
               top_k=0)
    for tokens in rows:
        text, stopped = text_of(tokens, vocab)
        assert stopped and re.fullmatch(pattern, text), text
