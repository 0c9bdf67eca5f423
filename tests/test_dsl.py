"""The sampling DSL (SPEC §9): programs equal the built-in stages exactly (numpy and
torch), token identity survives sort/slice, every malformed program gets a precise
line:column error, degenerate masks behave, beam search over forked matchers, and the
examples of docs/sampling-dsl.md parse and run."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tether
from tether.engine import bitmask
from tether.errors import CompileError, NoLegalContinuation, TetherError
from tether.sampling import Pipeline, ProgramError, beam_search, parse_program

DOC = Path(__file__).resolve().parents[1] / "docs" / "sampling-dsl.md"

# program text → the pipeline it must equal exactly
EQUIVALENT = [
    ("top_k 7", Pipeline(top_k=7)),
    ("sort -\nslice :7", Pipeline(top_k=7)),
    ("top_p 0.8", Pipeline(top_p=0.8)),
    ("softmax\nsort -\ncumsum exclusive\nthreshold >= 0.8", Pipeline(top_p=0.8)),
    ("min_p 0.1", Pipeline(min_p=0.1)),
    ("temperature 0.6", Pipeline(temperature=0.6)),
    ("temperature 1.7\ntop_k 40\ntop_p 0.9\nmin_p 0.05",
     Pipeline(temperature=1.7, top_k=40, top_p=0.9, min_p=0.05)),
    ("temperature 0.5\nsoftmax\nsort -\ncumsum exclusive\nthreshold >= 0.95\nsample",
     Pipeline(temperature=0.5, top_p=0.95)),
]


def random_vectors(count: int, seed: int = 0):
    """``count`` (logits, allowed) pairs of varied sizes and mask densities."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        size = int(rng.integers(2, 1500))
        logits = rng.normal(0, rng.uniform(0.5, 4), size).astype(np.float32)
        while len(np.unique(logits)) < size:  # no ties: sort/slice cuts exactly where top-k does
            logits = rng.normal(0, 3, size).astype(np.float32)
        allowed = rng.random(size) < rng.uniform(0.05, 1.0)
        allowed[rng.integers(size)] = True
        yield logits, allowed


def test_programs_equal_builtin_stages_numpy():
    programs = [(parse_program(text), pipeline) for text, pipeline in EQUIVALENT]
    for logits, allowed in random_vectors(1000):
        mask = bitmask.from_bool(allowed)
        for program, pipeline in programs:
            np.testing.assert_array_equal(program.apply(logits, mask), pipeline.apply(logits, mask),
                                          err_msg=program.source)


def test_programs_equal_builtin_stages_torch():
    torch = pytest.importorskip("torch")
    programs = [(parse_program(text), pipeline) for text, pipeline in EQUIVALENT]
    vectors = list(random_vectors(1000, seed=1))
    for start in range(0, 1000, 20):  # batches of 20 rows, one mask per row
        size = min(len(v[0]) for v in vectors[start:start + 20])
        logits = np.stack([v[0][:size] for v in vectors[start:start + 20]])
        allowed = np.stack([v[1][:size] for v in vectors[start:start + 20]])
        allowed[:, 0] = True
        masks = bitmask.from_bool(allowed)
        for program, pipeline in programs:
            got = program.apply(torch.from_numpy(logits), masks)
            want = pipeline.apply(torch.from_numpy(logits), torch.from_numpy(masks.view(np.int32)))
            assert torch.equal(got, want), program.source
            numpy_result = pipeline.apply(logits, masks)
            np.testing.assert_array_equal(np.isfinite(got.numpy()), np.isfinite(numpy_result))
            finite = np.isfinite(numpy_result)
            np.testing.assert_allclose(got.numpy()[finite], numpy_result[finite], rtol=1e-6)


# -- token identity --------------------------------------------------------------------------
def test_sort_then_slice_keeps_token_identities():
    rng = np.random.default_rng(3)
    for _ in range(50):
        logits = rng.normal(0, 2, 500).astype(np.float32)
        for k in (1, 5, 40):
            out = parse_program(f"sort -\nslice :{k}").apply(logits)
            top = np.argsort(-logits)[:k]
            assert set(np.flatnonzero(np.isfinite(out))) == set(top)
            np.testing.assert_array_equal(out[top], logits[top])  # values stay with their ids
        out = parse_program("sort +\nslice :3").apply(logits)
        np.testing.assert_array_equal(np.flatnonzero(np.isfinite(out)),
                                      np.sort(np.argsort(logits)[:3]))


def test_slice_has_python_semantics_on_the_view():
    logits = np.array([0.5, 3.0, -1.0, 2.0, 1.0], dtype=np.float32)
    view = [1, 3, 4, 0, 2]  # token ids, best first
    for spec in (":-1", "-2:", "1:4", "::2", "4:0:-2", "1:", ":3", "-4:-1:2"):
        parts = [int(p) if p else None for p in spec.split(":")]
        out = parse_program(f"sort -\nslice {spec}").apply(logits)
        assert np.flatnonzero(np.isfinite(out)).tolist() == sorted(view[slice(*parts)]), spec
    # seed 003 documented `slice k:` as top-k: it keeps all *but* the top k
    out = parse_program("sort -\nslice 2:").apply(logits)
    assert np.flatnonzero(np.isfinite(out)).tolist() == sorted(view[2:])
    # without a sort the view is by token id
    out = parse_program("slice 1:3").apply(logits)
    assert np.flatnonzero(np.isfinite(out)).tolist() == [1, 2]


def test_slice_that_keeps_nothing_raises_instead_of_nan():
    logits = np.zeros(10, dtype=np.float32)
    for text in ("sort -\nslice :0", "slice 10:", "threshold > -100"):
        with pytest.raises(NoLegalContinuation):
            parse_program(text).sample(logits, rng=np.random.default_rng(0))


def test_threshold_compares_the_current_values():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    keep = np.isfinite(parse_program("softmax\nthreshold < 0.1").apply(logits))
    assert keep.tolist() == [True, True, True, False]
    keep = np.isfinite(parse_program(f"threshold <= {logits[1]}").apply(logits))
    assert keep.tolist() == [True, False, False, False]
    keep = np.isfinite(parse_program("softmax\nsort -\ncumsum\nthreshold > 0.85").apply(logits))
    assert keep.tolist() == [True, True, False, False]  # inclusive running sums: 0.5 0.8 0.95 1
    keep = np.isfinite(parse_program("threshold != 0").apply(np.zeros(3, dtype=np.float32)))
    assert keep.all()


def test_min_p_is_relative_to_the_top_probability():
    logits = np.log(np.array([0.6, 0.2, 0.1, 0.05, 0.05], dtype=np.float32))
    keep = np.isfinite(parse_program("min_p 0.3").apply(logits))
    assert keep.tolist() == [True, True, False, False, False]  # p ≥ 0.3 · 0.6


def test_penalties_and_explicit_mask_position():
    logits = np.array([3.0, 2.9, 0.0, 5.0], dtype=np.float32)
    mask = bitmask.from_ids([0, 1, 2], 4)
    assert parse_program("penalty presence 1\nargmax").sample(logits, mask, [0]).token == 1
    assert parse_program("penalty repetition 2\nargmax").sample(logits, mask, [0]).token == 1
    assert parse_program("penalty frequency 0.05\nargmax").sample(logits, mask, [0]).token == 0
    # mask after top_k 1: the best token (3) is disallowed, nothing is left
    with pytest.raises(NoLegalContinuation):
        parse_program("top_k 1\nmask").sample(logits, mask)
    assert parse_program("mask\ntop_k 1").sample(logits, mask).token == 0


def test_pick_commands():
    logits = np.array([0.0, 1.0, 1.0, -1.0], dtype=np.float32)
    assert parse_program("argmax").sample(logits).token == 1
    assert parse_program("").sample(logits, rng=np.random.default_rng(0)).token in range(4)
    beam = parse_program("top_k 3\nbeam 4")
    assert beam.pick == "beam" and beam.beam_width == 4
    with pytest.raises(TetherError, match="beam"):
        beam.sample(logits)
    assert beam.argmax(logits).token == 1


# -- identity and degenerate cases ------------------------------------------------------------
PROGRAMS = ["sample", "temperature 0.8\ntop_p 0.9", "sort -\nslice :20\ntemperature 1.3",
            "min_p 0.05\ntop_k 10", "softmax\nsort -\ncumsum exclusive\nthreshold >= 0.7"]


@pytest.mark.parametrize("text", PROGRAMS)
def test_all_allowed_mask_leaves_sampling_unchanged(text):
    program = parse_program(text)
    rng = np.random.default_rng(21)
    for size in (300, 40000):  # a full row, and a windowed one
        logits = rng.normal(0, 3, size).astype(np.float32)
        everything = bitmask.from_bool(np.ones(size, dtype=bool))
        np.testing.assert_array_equal(program.apply(logits, everything), program.apply(logits))
        a = [program.sample(logits, everything, rng=np.random.default_rng(s)).token
             for s in range(10)]
        b = [program.sample(logits, rng=np.random.default_rng(s)).token for s in range(10)]
        assert a == b


@pytest.mark.parametrize("text", PROGRAMS)
def test_one_token_mask_forces_it_and_empty_mask_raises(text):
    program = parse_program(text)
    logits = np.random.default_rng(2).normal(0, 3, 1000).astype(np.float32)
    worst = int(np.argmin(logits))
    step = program.sample(logits, bitmask.from_ids([worst], 1000), rng=np.random.default_rng(0))
    assert step.token == worst and step.feasible == 1
    assert step.logprob == pytest.approx(0.0, abs=1e-9) and math.isfinite(step.kl)
    for mask in (bitmask.from_ids([], 1000), None):
        values = logits if mask is not None else np.full(1000, np.nan, dtype=np.float32)
        with pytest.raises(NoLegalContinuation):
            program.sample(values, mask)
        with pytest.raises(NoLegalContinuation):
            program.apply(values, mask)


# -- malformed programs: every one gets its exact line:column --------------------------------
MALFORMED = [
    ("theshold < 1", "1:1", "unknown command 'theshold' (did you mean 'threshold'?)"),
    ("top_k 5\nfoo", "2:1", "unknown command 'foo'"),
    ("  tempreature 0.7", "1:3", "did you mean 'temperature'"),
    ("TOP_K 5", "1:1", "unknown command"),
    ("top-k 5", "1:1", "did you mean 'top_k'"),
    ("top_k", "1:6", "top_k needs a count"),
    ("top_k   # five", "1:6", "top_k needs a count"),
    ("top_k 1.5", "1:7", "top_k must be an integer, not '1.5'"),
    ("top_k 0", "1:7", "top_k must be ≥ 1, not 0"),
    ("top_k -3", "1:7", "top_k must be ≥ 1"),
    ("top_k five", "1:7", "must be an integer"),
    ("top_k 5 6", "1:9", "top_k takes 1 argument; unexpected '6'"),
    ("top_p", "1:6", "top_p needs a probability"),
    ("top_p 0", "1:7", "top_p must be in (0, 1], not 0"),
    ("top_p 1.5", "1:7", "top_p must be in (0, 1]"),
    ("top_p -0.1", "1:7", "top_p must be in (0, 1]"),
    ("top_p nan", "1:7", "top_p must be in (0, 1]"),
    ("top_p abc", "1:7", "top_p must be a number, not 'abc'"),
    ("min_p 0", "1:7", "min_p must be in (0, 1]"),
    ("min_p 2", "1:7", "min_p must be in (0, 1]"),
    ("min_p", "1:6", "min_p needs a probability"),
    ("temperature 0", "1:13", "temperature must be > 0 (use argmax for greedy decoding)"),
    ("temperature -1", "1:13", "temperature must be > 0"),
    ("temperature inf", "1:13", "temperature must be > 0"),
    ("temperature", "1:12", "temperature needs a value"),
    ("temperature hot", "1:13", "temperature must be a number"),
    ("\n\ntemperature 0.7 0.8", "3:17", "takes 1 argument; unexpected '0.8'"),
    ("sort *", "1:6", "sort order must be - (descending) or + (ascending)"),
    ("sort desc", "1:6", "sort order must be"),
    ("sort - +", "1:8", "sort takes 1 argument"),
    ("slice", "1:6", "slice needs a range"),
    ("slice 5", "1:7", "slice needs start:stop or start:stop:step, not '5'"),
    ("slice 1:2:3:4", "1:7", "slice needs start:stop or start:stop:step"),
    ("slice a:3", "1:7", "slice bounds must be integers, not 'a'"),
    ("slice 3:b", "1:9", "slice bounds must be integers, not 'b'"),
    ("slice 1:10:x", "1:12", "slice bounds must be integers, not 'x'"),
    ("slice 1.5:3", "1:7", "slice bounds must be integers"),
    ("slice 1:5:0", "1:11", "slice step cannot be zero"),
    ("slice :5 :6", "1:10", "slice takes 1 argument"),
    ("threshold", "1:10", "threshold needs an operator and a value"),
    ("threshold <", "1:12", "threshold needs an operator and a value"),
    ("threshold =< 1", "1:11", "threshold needs a comparison (< <= > >= == !=), not '=<'"),
    ("threshold <0.5", "1:11", "needs a space between the operator and the value (< 0.5)"),
    ("threshold < x", "1:13", "threshold value must be a number, not 'x'"),
    ("threshold < nan", "1:13", "threshold value must be finite"),
    ("threshold < 1 2", "1:15", "threshold takes 2 arguments"),
    ("penalty", "1:8", "penalty needs a kind and a value"),
    ("penalty repetition", "1:19", "penalty needs a kind and a value"),
    ("penalty repeat 1.1", "1:9", "penalty kind must be one of repetition, presence, frequency"),
    ("penalty repetition 0", "1:20", "repetition penalty must be > 0"),
    ("penalty presence x", "1:18", "presence penalty must be a number"),
    ("mask now", "1:6", "mask takes no arguments; unexpected 'now'"),
    ("mask\ntop_k 3\nmask", "3:1", "mask appears twice (first at line 1)"),
    ("softmax 1", "1:9", "softmax takes no arguments"),
    ("cumsum", "1:1", "cumsum needs probabilities, but the values are logits here"),
    ("softmax\ncumsum sideways", "2:8", "cumsum takes `exclusive` or `inclusive`"),
    ("softmax\ntemperature 0.5", "2:1",
     "temperature changes logits, but the values are probabilities here (softmax at line 1)"),
    ("softmax\nsort -\ncumsum\npenalty presence 1", "4:1",
     "penalty changes logits, but the values are running sums here (softmax at line 1)"),
    ("softmax\ncumsum\nsoftmax", "3:1", "softmax changes logits"),
    ("argmax\ntop_k 3", "2:1", "'top_k' follows 'argmax' (line 1): 'argmax' must be the last"),
    ("sample\n\n# done\nsample", "4:1", "'sample' follows 'sample'"),
    ("beam 4\nargmax", "2:1", "'argmax' follows 'beam'"),
    ("argmax now", "1:8", "argmax takes no arguments"),
    ("beam", "1:5", "beam needs a width"),
    ("beam 0", "1:6", "beam width must be ≥ 1, not 0"),
    ("beam two", "1:6", "beam width must be an integer"),
    ("top_k 3\n\ttop_p x", "2:8", "top_p must be a number"),
    ("# header\n   min_p 0.05 # fine\n  slice 2", "3:9", "slice needs start:stop"),
    ("étape 1", "1:1", "unknown command 'étape'"),
    ("top_p 0.9\ntop_k 40\ntemperature 0.7 # comment\nthreshold ~ 3", "4:11",
     "threshold needs a comparison"),
]


def test_corpus_is_large_enough():
    assert len(MALFORMED) >= 50
    assert len({text for text, _, _ in MALFORMED}) == len(MALFORMED)


@pytest.mark.parametrize(("text", "location", "message"), MALFORMED,
                         ids=[repr(t) for t, _, _ in MALFORMED])
def test_malformed_program_gets_line_and_column(text, location, message):
    with pytest.raises(ProgramError) as info:
        parse_program(text)
    error = info.value
    assert isinstance(error, CompileError)
    assert error.location == location
    assert message in error.message
    assert str(error).endswith(f"at {location}")
    assert re.fullmatch(r"\d+:\d+", error.location)


WORDS = ["sort", "slice", "threshold", "temperature", "top_k", "top_p", "min_p", "penalty",
         "mask", "softmax", "cumsum", "logits", "argmax", "sample", "beam", "-", "+", ":3",
         "1:-2", "<", ">=", "0.5", "7", "-1", "nan", "repetition", "exclusive", "#", "\t"]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60),
                 st.lists(st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join),
                          max_size=6).map("\n".join)))
def test_any_text_parses_or_fails_with_a_location(text):
    try:
        program = parse_program(text)
    except ProgramError as e:
        line, column = (int(v) for v in e.location.split(":"))
        lines = text.splitlines()
        assert 1 <= line <= len(lines) and 1 <= column <= len(lines[line - 1]) + 1
        return
    logits = np.linspace(-3, 3, 50, dtype=np.float32)
    try:
        if program.pick != "beam":
            assert 0 <= program.sample(logits, rng=np.random.default_rng(0)).token < 50
    except NoLegalContinuation:
        pass  # a valid program may remove every token


def test_comments_and_blank_lines_are_ignored():
    program = parse_program("\n# a program\n\n  top_k 5   # keep five\n\t\nsample # pick\n")
    assert len(program.stages) == 1 and program.pick == "sample"


# -- generate() and the CLI accept programs ----------------------------------------------------
class TinyModel:
    """A model over single bytes whose logits prefer the byte after the last one."""

    def __init__(self) -> None:
        self.vocab = tether.Vocabulary([bytes([b]) for b in range(128)] + [b""], eos_ids=[128])
        self.n_ctx = 256
        self.history: list[int] = []

    def tokenize(self, data: bytes, *, special: bool = False, add_bos: bool = False):
        return list(data)

    def eval(self, tokens) -> None:
        self.history.extend(tokens)

    def logits(self) -> np.ndarray:
        x = np.zeros(129, dtype=np.float32)
        x[(self.history[-1] + 1) % 128] = 8.0
        return x

    def reset(self) -> None:
        self.history = []

    def chat_prompt(self, prompt: str, system: str | None = None):
        return self.tokenize(prompt.encode())


def test_generate_accepts_a_program_text_or_object():
    model = TinyModel()
    by_text = tether.generate("a", tether.Regex("[a-z]{4}"), model=model, sampling="argmax")
    assert by_text.text == "bcde"
    program = parse_program("temperature 0.5\ntop_k 1")
    assert tether.generate("a", tether.Regex("[a-z]{4}"), model=model,
                           sampling=program).text == "bcde"
    beam = tether.generate("a", tether.Regex("[a-z]{3}"), model=model, sampling="beam 3")
    assert beam.text == "bcd" and beam.stop_reason == "constraint_complete"
    with pytest.raises(ProgramError):
        tether.generate("a", None, model=model, sampling="top_k")
    with pytest.raises(TetherError, match="temperature"):
        tether.generate("a", None, model=model, sampling="top_k 3", temperature=0.5)


def test_cli_sampling_from_text_and_file(tmp_path, capsys):
    from tether import cli

    path = tmp_path / "greedy.tsp"
    path.write_text("# greedy\nargmax\n")
    assert cli._sampling(str(path)).pick == "argmax"
    assert cli._sampling("top_k 3\nsample").stages[0].k == 3
    assert cli.main(["generate", "--sampling", "top_k 3\nfoo", "x"]) == 2
    assert "unknown command 'foo'" in capsys.readouterr().err


# -- beam search over forked matchers ------------------------------------------------------------
class PrefixModel:
    """A fake model over a real vocabulary: logits chosen by the bytes generated so far."""

    def __init__(self, vocab, table) -> None:
        self.vocab, self.table = vocab, table
        self.calls = 0

    def next_logits(self, tokens):
        self.calls += 1
        text = b"".join(self.vocab.token_bytes(t) for t in tokens)
        x = np.full(self.vocab.size, -20.0, dtype=np.float32)
        for piece, value in self.table.get(text, {}).items():
            x[self.token(piece)] = value
        return x

    def token(self, piece: bytes) -> int:
        return self.vocab.tokens.index(piece)


TRAP = {b"": {b"the": 2.0, b"a": 1.5},  # greedy takes "the" (p≈0.62)…
        b"the": {b" cat": 0.0, b" dog": 0.0},  # …then a coin flip (p=0.5)
        b"a": {b" cat": 5.0, b" dog": -5.0}}  # "a cat" is more likely overall (≈0.38)


def test_beam_search_beats_greedy_and_respects_the_constraint(smollm2_vocab):
    compiled = tether.compile(tether.Regex("(the|a) (cat|dog)"), smollm2_vocab)
    model = PrefixModel(smollm2_vocab, TRAP)
    greedy = beam_search(model, smollm2_vocab, 1, matcher=compiled.matcher())[0]
    assert b"".join(smollm2_vocab.token_bytes(t) for t in greedy.tokens).startswith(b"the ")
    best = beam_search(model, smollm2_vocab, 2, matcher=compiled.matcher())
    text = b"".join(smollm2_vocab.token_bytes(t) for t in best[0].tokens)
    assert text == b"a cat" and best[0].stop_reason == "constraint_complete"
    assert best[0].score > greedy.score
    assert best[0].score == pytest.approx(sum(s.logprob for s in best[0].steps))
    for hyp in best:
        decoded = b"".join(smollm2_vocab.token_bytes(t) for t in hyp.tokens).decode()
        assert re.fullmatch("(the|a) (cat|dog)", decoded)


def test_beam_search_finds_the_exact_best_sequence(smollm2_vocab):
    """With a wide beam, the best hypothesis is the most likely sequence, checked by
    enumerating every token sequence the constraint allows."""
    compiled = tether.compile(tether.Regex("(ab|b)c?"), smollm2_vocab)
    rng = np.random.default_rng(5)
    base = rng.normal(0, 2, smollm2_vocab.size).astype(np.float32)

    class Noisy:
        def next_logits(self, tokens):
            return base + np.float32(len(tokens)) * np.roll(base, 7 * len(tokens) + 1)

    def exhaustive(matcher, tokens, score):
        if matcher.is_finished():
            yield score, tuple(tokens)
            return
        raw = Noisy().next_logits(tokens)
        masked = bitmask.apply_to_logits(raw, matcher.mask())
        live = np.flatnonzero(np.isfinite(masked))
        logz = np.logaddexp.reduce(masked[live].astype(np.float64))
        for t in live:
            lp = float(masked[t]) - logz
            if smollm2_vocab.is_eos(int(t)):
                yield score + lp, tuple(tokens)
                continue
            child = matcher.fork()
            child.consume(int(t))
            yield from exhaustive(child, [*tokens, int(t)], score + lp)

    want_score, want_tokens = max(exhaustive(compiled.matcher(), [], 0.0))
    got = beam_search(Noisy(), smollm2_vocab, 64, matcher=compiled.matcher())[0]
    assert got.tokens == want_tokens
    assert got.score == pytest.approx(want_score, abs=1e-6)


def test_beam_search_budget_eog_and_program_stages():
    vocab = tether.Vocabulary([b"x", b"y", b""], eos_ids=[2])

    class Source:
        def next_logits(self, tokens):
            return np.array([1.0, 0.0, 2.0 if len(tokens) >= 2 else -9.0], dtype=np.float32)

    hyps = beam_search(Source(), vocab, 2, max_tokens=8)
    assert hyps[0].stop_reason == "eog" and len(hyps[0].tokens) == 2
    assert hyps[0].steps[-1].token == 2
    short = beam_search(Source(), vocab, 2, max_tokens=1)
    assert all(h.stop_reason == "budget" and len(h.tokens) == 1 for h in short)
    only_y = beam_search(Source(), vocab, 3, max_tokens=1,
                         sampling=parse_program("sort -\nslice 1:2"))
    assert [h.tokens for h in only_y] == [(1,)]
    with pytest.raises(TetherError):
        beam_search(Source(), vocab, 0)


# -- the documentation ------------------------------------------------------------------------
def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_doc_programs_parse_and_run():
    programs = _blocks("sampling")
    assert len(programs) >= 8
    logits = np.random.default_rng(0).normal(0, 3, 200).astype(np.float32)
    for text in programs:
        program = parse_program(text)
        if program.pick != "beam":
            assert 0 <= program.sample(logits, rng=np.random.default_rng(0)).token < 200


def test_doc_python_examples_run():
    blocks = _blocks("python")
    assert blocks
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})  # noqa: S102 - our own documentation


@pytest.mark.model
def test_beam_program_with_the_embedded_model(monkeypatch):
    pytest.importorskip("llama_cpp")
    from tether.runtime.llama import LlamaModel

    pattern = "[A-Z][a-z]{2,10}"
    fast = tether.generate("Suggest a name for a cat.", tether.Regex(pattern),
                           sampling="temperature 0.8\ntop_k 20\nbeam 3", max_tokens=12)
    monkeypatch.setattr(LlamaModel, "truncate", lambda self, n: False)  # re-read each beam
    slow = tether.generate("Suggest a name for a cat.", tether.Regex(pattern),
                           sampling="temperature 0.8\ntop_k 20\nbeam 3", max_tokens=12)
    assert re.fullmatch(pattern, fast.text) and fast.text == slow.text
    assert fast.tokens == slow.tokens
    assert [s.logprob for s in fast.kl] == pytest.approx([s.logprob for s in slow.kl], abs=1e-4)
