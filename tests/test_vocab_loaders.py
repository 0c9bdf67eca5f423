"""The vocabulary loaders against each tokenizer's own library, token for token (SPEC §2).

For every id of every real tokenizer, ``vocab.token_bytes(i)`` must equal the bytes the
tokenizer's library gives for that token in the middle of a sequence, and control tokens
must be flagged special:

* SmolLM2 GGUF: llama-cpp-python (``vocab_only=True``), ``llama_token_to_piece`` with
  special tokens rendered, ``llama_vocab_get_attr`` and ``llama_vocab_is_eog``;
  also its ``tokenizer.json`` form, written by transformers from the GGUF;
* DeepSeek V4 ``tokenizer.json``: the ``tokenizers`` library and transformers' own copy of
  the GPT-2 byte<->unicode table;
* cl100k_base: ``tiktoken.Encoding.decode_single_token_bytes``;
* Mistral 7B SentencePiece model: the ``sentencepiece`` library;
* GPT-2 ``encoder.json``: the ``tokenizers`` library.

Load times are printed (run with ``-s`` to see them), not asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import VocabularyError
from tether.vocab import Vocabulary, byte_level
from tether.vocab.gguf import read_header, read_metadata
from tether.vocab.loaders import load_transformers
from tether.vocab.sentencepiece_model import parse_model

LOAD_SECONDS: dict[str, float] = {}


def timed_load(label: str, path: Path) -> Vocabulary:
    start = time.perf_counter()
    vocab = Vocabulary.from_file(path)
    LOAD_SECONDS[label] = time.perf_counter() - start
    return vocab


def gpt2_char_to_byte() -> dict[str, int]:
    """The GPT-2 mapping from transformers (independent of tether's)."""
    try:
        from transformers.convert_slow_tokenizer import bytes_to_unicode
    except ImportError:
        from transformers.models.clvp.tokenization_clvp import bytes_to_unicode
    return {c: b for b, c in bytes_to_unicode().items()}


def assert_same_vocab(a: Vocabulary, b: Vocabulary, *, check_eos: bool = True) -> None:
    assert a.size == b.size
    diff = [i for i in range(a.size) if a.token_bytes(i) != b.token_bytes(i)]
    assert diff == [], [(i, a.token_bytes(i), b.token_bytes(i)) for i in diff[:10]]
    assert np.array_equal(a.special, b.special), np.flatnonzero(a.special != b.special)[:10]
    if check_eos:
        assert a.eos_ids == b.eos_ids


def mismatches(vocab: Vocabulary, expected: dict[int, bytes]) -> list[tuple[int, bytes, bytes]]:
    return [(i, vocab.token_bytes(i), want) for i, want in expected.items()
            if vocab.token_bytes(i) != want]


# == SmolLM2 (GGUF) ==========================================================================
@pytest.fixture(scope="module")
def smollm2(smollm2_gguf: Path) -> Vocabulary:
    return timed_load("SmolLM2 GGUF", smollm2_gguf)


@pytest.fixture(scope="module")
def smollm2_llama(smollm2_gguf: Path):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    llama = llama_cpp.Llama(model_path=str(smollm2_gguf), vocab_only=True, verbose=False)
    yield llama
    llama.close()


def llama_reference(llama) -> tuple[list[bytes], set[int], set[int]]:
    """Every token's bytes, the control/unknown/unused ids and the EOG ids, per llama.cpp."""
    import ctypes

    import llama_cpp

    vocab = llama._model.vocab
    special_attrs = (llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
                     | llama_cpp.LLAMA_TOKEN_ATTR_UNUSED)
    buf = ctypes.create_string_buffer(256)
    pieces, special, eog = [], set(), set()
    for i in range(llama.n_vocab()):
        n = llama_cpp.llama_token_to_piece(vocab, i, buf, 256, 0, True)
        assert 0 <= n <= 256
        pieces.append(buf.raw[:n])
        if llama_cpp.llama_vocab_get_attr(vocab, i) & special_attrs:
            special.add(i)
        if llama_cpp.llama_vocab_is_eog(vocab, i):
            eog.add(i)
    return pieces, special, eog


def test_smollm2_gguf_matches_llama_cpp(smollm2: Vocabulary, smollm2_llama) -> None:
    pieces, special, eog = llama_reference(smollm2_llama)
    assert smollm2.size == len(pieces) == 49152
    assert mismatches(smollm2, dict(enumerate(pieces))) == []
    assert set(np.flatnonzero(smollm2.special).tolist()) == special
    assert smollm2.eos_ids == eog
    # Llama.detokenize() agrees too, except that it drops tokens longer than its fixed
    # 32-byte buffer (a llama-cpp-python limitation; ids 1, 2 are not BOS here, so no
    # leading-space strip either).
    short = [i for i in range(smollm2.size) if len(smollm2.token_bytes(i)) <= 32]
    assert len(short) < smollm2.size
    assert [smollm2_llama.detokenize([i], special=True) for i in short] == \
        [smollm2.token_bytes(i) for i in short]


def test_from_llama_equals_from_file(smollm2: Vocabulary, smollm2_llama) -> None:
    start = time.perf_counter()
    from_llama = Vocabulary.from_llama(smollm2_llama)
    LOAD_SECONDS["SmolLM2 from_llama"] = time.perf_counter() - start
    assert_same_vocab(from_llama, smollm2)
    assert from_llama.fingerprint == smollm2.fingerprint


def test_smollm2_flags_and_end_of_generation(smollm2: Vocabulary) -> None:
    by_bytes = {smollm2.token_bytes(i): i for i in range(smollm2.size)}
    im_end, endoftext = by_bytes[b"<|im_end|>"], by_bytes[b"<|endoftext|>"]
    assert {im_end, endoftext} <= smollm2.eos_ids
    # llama.cpp also ends generation on the FIM repo-name token (<reponame>, Granite's text)
    assert smollm2.eos_ids == {im_end, endoftext, by_bytes[b"<reponame>"]}
    assert smollm2.is_special(by_bytes[b"<|im_start|>"])
    assert not smollm2.is_eos(by_bytes[b"<|im_start|>"])
    assert int(smollm2.special.sum()) == 17
    cr_only = [i for i in range(smollm2.size)
               if b"\r" in smollm2.token_bytes(i) and b"\n" not in smollm2.token_bytes(i)]
    assert cr_only, "SmolLM2 has tokens with CR and no LF"
    assert smollm2.has_newline[cr_only].all()
    newline = by_bytes[b"\n"]
    assert smollm2.has_newline[newline] and smollm2.whitespace_only[newline]
    assert smollm2.leading_space[by_bytes[b" the"]]
    assert not smollm2.has_newline[im_end] and not smollm2.whitespace_only[im_end]


def test_smollm2_trie(smollm2: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_CACHE_DIR", "off")
    trie = smollm2.trie  # built afresh: the on-disk cache is off
    ids = [i for i in range(smollm2.size) if not smollm2.is_special(i)]
    assert trie.token_ids.tolist() == ids
    prefixes = {t[:k] for t in (smollm2.token_bytes(i) for i in ids)
                for k in range(1, len(t) + 1)}
    assert trie.n_nodes == len(prefixes) + 1
    text: list[bytes] = [b""] * trie.n_nodes  # node -> its prefix, parents come first
    for n in range(1, trie.n_nodes):
        text[n] = text[trie.parent[n]] + bytes([trie.node_byte[n]])
    assert all(text[node] == smollm2.token_bytes(tid)
               for tid, node in zip(trie.token_ids.tolist(), trie.token_node.tolist(),
                                    strict=True))
    assert trie.depth == max(len(smollm2.token_bytes(i)) for i in ids)


def _longest_first_reference(vocab: Vocabulary, data: bytes) -> list[int] | None:
    """Segmentation by dictionary lookups, longest candidate first (lowest id on ties)."""
    ids: dict[bytes, int] = {}
    for i in range(vocab.size):
        if vocab.token_bytes(i) and not vocab.is_special(i):
            ids.setdefault(vocab.token_bytes(i), i)
    out, at = [], 0
    while at < len(data):
        size = next((n for n in range(len(data) - at, 0, -1) if data[at:at + n] in ids), 0)
        if not size:
            return None
        out.append(ids[data[at:at + size]])
        at += size
    return out


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40) | st.text(alphabet='{}[]",: abcdefghij0123456789_\n',
                                        max_size=120).map(str.encode))
def test_segmentations(data: bytes) -> None:
    """``segment``: longest token first, as dictionary lookups do it; ``segment_fewest``:
    spells ``data`` in the fewest tokens a search over every split finds."""
    vocab = _SEGMENT_VOCAB
    assert vocab.segment(data) == _longest_first_reference(vocab, data)
    fewest = vocab.segment_fewest(data)
    tokens = {vocab.token_bytes(i) for i in range(len(_SEGMENT_TOKENS))}
    need = [0] + [-1] * len(data)  # need[i]: fewest tokens spelling data[:i]
    for end in range(1, len(data) + 1):
        options = [need[start] + 1 for start in range(end)
                   if need[start] >= 0 and data[start:end] in tokens]
        need[end] = min(options, default=-1)
    if need[-1] < 0:
        assert fewest is None
    else:
        assert fewest is not None and len(fewest) == need[-1]
        assert b"".join(vocab.token_bytes(t) for t in fewest) == data


_SEGMENT_TOKENS = [bytes([b]) for b in b'{}[]",: abcdefghij0123456789_'] + [
    b'{"', b'":', b'","', b'abc', b'ab', b'bcd', b'abcdefg', b'0123', b'"ab', b'ab', b"\n\n",
    b"\xff"]  # "ab" twice: the lower id wins
_SEGMENT_VOCAB = Vocabulary([*_SEGMENT_TOKENS, b""], eos_ids=[len(_SEGMENT_TOKENS)])


# == SmolLM2 (tokenizer.json written by transformers) =========================================
@pytest.fixture(scope="module")
def smollm2_hf(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory):
    """(transformers tokenizer built from the GGUF, path of its tokenizer.json)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    tok = transformers.AutoTokenizer.from_pretrained(str(smollm2_gguf.parent),
                                                     gguf_file=smollm2_gguf.name)
    path = tmp_path_factory.mktemp("smollm2-json") / "tokenizer.json"
    path.write_text(tok.backend_tokenizer.to_str(), encoding="utf-8")
    return tok, path


def test_smollm2_tokenizer_json_equals_gguf(smollm2: Vocabulary, smollm2_hf) -> None:
    tok, path = smollm2_hf
    from_json = timed_load("SmolLM2 tokenizer.json", path)
    assert_same_vocab(from_json, smollm2, check_eos=False)
    # tokenizer.json has no eos id; its end markers are <|im_end|> and <|endoftext|>.
    # llama.cpp's set adds the FIM repo-name token <reponame>.
    assert from_json.eos_ids == smollm2.eos_ids - {4}
    assert from_json.token_bytes(4) == b"<reponame>"


def test_smollm2_from_transformers_tokenizer(smollm2: Vocabulary, smollm2_hf) -> None:
    tok, _ = smollm2_hf
    start = time.perf_counter()
    vocab = Vocabulary.from_tokenizer(tok)
    LOAD_SECONDS["SmolLM2 from_tokenizer"] = time.perf_counter() - start
    assert_same_vocab(vocab, smollm2, check_eos=False)
    assert tok.eos_token_id in vocab.eos_ids
    assert vocab.eos_ids == smollm2.eos_ids - {4}
    decoded = tok.batch_decode([[i] for i in range(vocab.size)], skip_special_tokens=False,
                               clean_up_tokenization_spaces=False)
    assert [vocab.token_bytes(i).decode("utf-8", "replace") for i in range(vocab.size)] \
        == decoded


# == DeepSeek V4 (tokenizer.json) ==============================================================
@pytest.fixture(scope="module")
def deepseek(deepseek_tokenizer_json: Path) -> Vocabulary:
    return timed_load("DeepSeek V4 tokenizer.json", deepseek_tokenizer_json)


def test_deepseek_matches_tokenizers(deepseek: Vocabulary, deepseek_tokenizer_json: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(deepseek_tokenizer_json))
    added = tok.get_added_tokens_decoder()
    to_byte = gpt2_char_to_byte()
    expected = {}
    for i in range(tok.get_vocab_size(with_added_tokens=True)):
        if i in added:
            expected[i] = added[i].content.encode("utf-8")
        else:
            expected[i] = bytes(to_byte[c] for c in tok.id_to_token(i))
    assert deepseek.size == len(expected) == 129280
    assert mismatches(deepseek, expected) == []
    special = {i for i, t in added.items() if t.special}
    assert set(np.flatnonzero(deepseek.special).tolist()) == special
    assert not deepseek.is_special(tok.token_to_id("<think>"))  # added, not special
    decoded = tok.decode_batch([[i] for i in range(deepseek.size)], skip_special_tokens=False)
    got = [deepseek.token_bytes(i).decode("utf-8", "replace") for i in range(deepseek.size)]
    assert [(i, g, d) for i, (g, d) in enumerate(zip(got, decoded, strict=True)) if g != d] == []
    assert_same_vocab(Vocabulary.from_tokenizer(tok), deepseek)  # a bare tokenizers.Tokenizer


def test_deepseek_end_of_generation(deepseek: Vocabulary, deepseek_tokenizer_json: Path,
                                    tmp_path: Path) -> None:
    eos = deepseek.tokens.index("<｜end▁of▁sentence｜>".encode())
    assert deepseek.eos_ids == {eos}
    # the eos_token of a tokenizer_config.json beside the file joins the set
    shutil.copy(deepseek_tokenizer_json, tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<｜▁pad▁｜>"}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [5, None]}))
    vocab = Vocabulary.from_file(tmp_path)  # a folder works too
    assert vocab.eos_ids == {eos, 2, 5}


# == cl100k_base (tiktoken) =====================================================================
@pytest.fixture(scope="module")
def cl100k(cl100k_tiktoken: Path) -> Vocabulary:
    return timed_load("cl100k_base .tiktoken", cl100k_tiktoken)


def test_cl100k_matches_tiktoken(cl100k: Vocabulary, cl100k_tiktoken: Path) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    specials = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
    # decoding does not use the split pattern; a simple one keeps this offline and short
    enc = tiktoken.Encoding("cl100k_base_local", pat_str=r"\s+|\S+",
                            mergeable_ranks=load_tiktoken_bpe(str(cl100k_tiktoken)),
                            special_tokens=specials)
    known = set(load_tiktoken_bpe(str(cl100k_tiktoken)).values()) | set(specials.values())
    assert cl100k.size == enc.max_token_value + 1 == 100277
    expected = {i: enc.decode_single_token_bytes(i) for i in sorted(known)}
    assert mismatches(cl100k, expected) == []
    gaps = set(range(cl100k.size)) - known
    assert gaps == {100256, *range(100261, 100276)}
    assert all(cl100k.token_bytes(i) == b"" for i in gaps)
    assert set(np.flatnonzero(cl100k.special).tolist()) == gaps | set(specials.values())
    assert cl100k.eos_ids == {100257}
    assert_same_vocab(Vocabulary.from_tokenizer(enc), cl100k)  # a tiktoken.Encoding object


# == Mistral 7B v0.1 (SentencePiece .model) =====================================================
@pytest.fixture(scope="module")
def mistral(mistral_sentencepiece_model: Path) -> Vocabulary:
    return timed_load("Mistral SentencePiece .model", mistral_sentencepiece_model)


@pytest.fixture(scope="module")
def mistral_sp(mistral_sentencepiece_model: Path):
    spm = pytest.importorskip("sentencepiece")
    return spm.SentencePieceProcessor(model_file=str(mistral_sentencepiece_model))


def test_mistral_matches_sentencepiece(mistral: Vocabulary, mistral_sp) -> None:
    sp = mistral_sp
    expected, special = {}, set()
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        if sp.is_byte(i):
            expected[i] = bytes([int(piece[3:5], 16)])
        elif sp.is_control(i) or sp.is_unknown(i):
            expected[i] = piece.encode("utf-8")
            special.add(i)
        else:
            expected[i] = piece.replace("▁", " ").encode("utf-8")
    assert mistral.size == len(expected) == 32000
    assert mismatches(mistral, expected) == []
    assert set(np.flatnonzero(mistral.special).tolist()) == special
    assert mistral.eos_ids == {sp.eos_id()} == {2}


def test_mistral_mid_sequence_decoding(mistral: Vocabulary, mistral_sp) -> None:
    """decode(prefix + [t]) - decode(prefix) == bytes(t) for the normal and ASCII byte tokens."""
    sp = mistral_sp
    prefix = sp.encode("Hi")
    base = sp.decode(prefix)
    ids = [i for i in range(mistral.size) if not mistral.is_special(i)
           and not (sp.is_byte(i) and mistral.token_bytes(i)[0] >= 0x80)]
    decoded = sp.decode([prefix + [i] for i in ids])
    bad = [(i, d) for i, d in zip(ids, decoded, strict=True)
           if not d.startswith(base) or d[len(base):].encode() != mistral.token_bytes(i)]
    assert bad == []


def test_sentencepiece_reader_fields(mistral_sentencepiece_model: Path, mistral_sp) -> None:
    model = parse_model(mistral_sentencepiece_model.read_bytes(), source="mistral")
    sp = mistral_sp
    assert [p.text for p in model.pieces] == [sp.id_to_piece(i) for i in range(32000)]
    assert all(abs(p.score - sp.get_score(i)) < 1e-6 for i, p in enumerate(model.pieces))
    assert (model.unk_id, model.bos_id, model.resolved_eos()) == (0, 1, 2)


def test_slow_sentencepiece_tokenizer_object(mistral: Vocabulary, mistral_sp) -> None:
    """A tokenizer object with only ``sp_model`` and added tokens (slow transformers style)."""

    class Added:
        def __init__(self, content: str, special: bool) -> None:
            self.content, self.special = content, special

    class SlowTokenizer:
        sp_model = mistral_sp
        eos_token_id = 2
        all_special_ids = [0, 1, 2]
        added_tokens_decoder = {32000: Added("<tool>", False), 32001: Added("[END]", True)}

    vocab = load_transformers(SlowTokenizer())
    assert vocab.size == 32002
    assert vocab.tokens[:32000] == mistral.tokens
    assert vocab.token_bytes(32000) == b"<tool>" and not vocab.is_special(32000)
    assert vocab.token_bytes(32001) == b"[END]" and vocab.is_special(32001)
    assert vocab.eos_ids == {2}


def test_transformers_sentencepiece_backend(mistral: Vocabulary,
                                            mistral_sentencepiece_model: Path) -> None:
    """transformers' slow SentencePiece tokenizer (``sp_model``), with added tokens."""
    transformers = pytest.importorskip("transformers")
    backend = getattr(transformers, "SentencePieceBackend", None)
    if backend is None:
        pytest.skip("this transformers has no SentencePieceBackend")
    tok = backend(vocab_file=str(mistral_sentencepiece_model))
    tok.add_tokens(["<tool>"])
    tok.add_special_tokens({"additional_special_tokens": ["[END]"]})
    vocab = Vocabulary.from_tokenizer(tok)
    assert vocab.size == len(tok) == 32002
    assert vocab.tokens[:32000] == mistral.tokens
    assert np.array_equal(vocab.special[:32000], mistral.special)
    tool, end = tok.convert_tokens_to_ids(["<tool>", "[END]"])
    assert vocab.token_bytes(tool) == b"<tool>" and not vocab.is_special(tool)
    assert vocab.token_bytes(end) == b"[END]" and vocab.is_special(end)
    assert vocab.eos_ids == {2}  # from the model's trainer spec (no eos_token set here)


# == GPT-2 (encoder.json + vocab.bpe) ===========================================================
def test_gpt2_encoder_json(gpt2_encoder_json: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    vocab = timed_load("GPT-2 encoder.json", gpt2_encoder_json)
    bpe = tokenizers.models.BPE.from_file(str(gpt2_encoder_json),
                                          str(gpt2_encoder_json.with_name("vocab.bpe")))
    tok = tokenizers.Tokenizer(bpe)
    tok.decoder = tokenizers.decoders.ByteLevel()
    to_byte = gpt2_char_to_byte()
    expected = {i: bytes(to_byte[c] for c in tok.id_to_token(i))
                for i in range(tok.get_vocab_size())}
    assert vocab.size == len(expected) == 50257
    assert mismatches(vocab, expected) == []
    decoded = tok.decode_batch([[i] for i in range(vocab.size)])
    assert [vocab.token_bytes(i).decode("utf-8", "replace") for i in range(vocab.size)] \
        == decoded
    assert vocab.eos_ids == {50256} and int(vocab.special.sum()) == 1


# == synthetic files: the less common token kinds ==================================================
def _write_gguf(path: Path, model: str, tokens: list[str], types: list[int], **ids: int) -> None:
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(8)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model(model)
    if model == "gpt2":
        w.add_tokenizer_pre("gpt-2")
        w.add_token_merges(["Ġ Ġ"])
    else:
        w.add_token_scores([0.0] * len(tokens))
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_chat_template("{{ messages }}")
    w.add_array("test.floats", [1.5, -2.0])
    for key, value in ids.items():
        w.add_uint32(f"tokenizer.ggml.{key}_token_id", value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


SPM_TOKENS = (["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
              + ["▁", "▁hello", "world", "▁▁", "<|im_end|>", "<user_sym>", "<unused0>", "é",
                 "▁a▁b", "<reponame>"])
SPM_TYPES = [2, 3, 3] + [6] * 256 + [1, 1, 1, 1, 3, 4, 5, 1, 4, 1]
BPE_TOKENS = ([byte_level.encode(bytes([b])) for b in range(256)]
              + ["ĠĠ", "čĊ", " user text", "<|endoftext|>", "<|im_end|>", "<|return|>",
                 "<|call|>", "<|end|>", "<|channel|>", "<0x41>", "<unused1>", "日本", "Ġé",
                 "<|fim_pad|>", "<|file_sep|>", "[EOS]", "<end_of_turn>", "<fim_prefix>"])
BPE_TYPES = [1] * 256 + [1, 1, 4, 3, 3, 3, 3, 3, 3, 6, 5, 1, 1, 3, 1, 3, 1, 1]


@pytest.fixture(scope="module")
def synthetic_ggufs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("gguf")
    _write_gguf(folder / "spm.gguf", "llama", SPM_TOKENS, SPM_TYPES, bos=1, eos=2)
    _write_gguf(folder / "bpe.gguf", "gpt2", BPE_TOKENS, BPE_TYPES, eos=259)
    return {"llama": folder / "spm.gguf", "gpt2": folder / "bpe.gguf"}


@pytest.mark.parametrize("model", ["llama", "gpt2"])
def test_synthetic_gguf_matches_llama_cpp(synthetic_ggufs: dict[str, Path], model: str) -> None:
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    path = synthetic_ggufs[model]
    llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        pieces, special, eog = llama_reference(llama)
    finally:
        llama.close()
    vocab = Vocabulary.from_file(path)
    assert mismatches(vocab, dict(enumerate(pieces))) == []
    assert set(np.flatnonzero(vocab.special).tolist()) == special
    assert vocab.eos_ids == eog


def test_synthetic_gguf_token_kinds(synthetic_ggufs: dict[str, Path]) -> None:
    spm = Vocabulary.from_file(synthetic_ggufs["llama"])
    at = {t: i for i, t in enumerate(SPM_TOKENS)}
    assert spm.token_bytes(at["<0x0A>"]) == b"\n" and not spm.is_special(at["<0x0A>"])
    assert spm.token_bytes(at["▁hello"]) == b" hello"
    assert spm.token_bytes(at["<user_sym>"]) == b"<user_sym>"
    assert spm.token_bytes(at["▁a▁b"]) == "▁a▁b".encode()  # user-defined: literal text
    assert spm.token_bytes(at["<unused0>"]) == b"" and spm.is_special(at["<unused0>"])
    assert spm.eos_ids == {at["</s>"], at["<|im_end|>"], at["<reponame>"]}
    bpe = Vocabulary.from_file(synthetic_ggufs["gpt2"])
    at = {t: i for i, t in enumerate(BPE_TOKENS)}
    assert bpe.token_bytes(at["čĊ"]) == b"\r\n"
    assert bpe.token_bytes(at[" user text"]) == b" user text"
    assert bpe.token_bytes(at["Ġé"]) == b" \xe9"  # byte-level: one byte, not UTF-8
    assert bpe.token_bytes(at["<0x41>"]) == b"A"
    assert not bpe.is_special(at["<|end|>"])  # gpt-oss: <|end|> is text when <|return|> is EOG
    assert bpe.eos_ids == {at[t] for t in ("<|endoftext|>", "<|im_end|>", "<|return|>",
                                           "<|call|>", "<|fim_pad|>", "<|file_sep|>", "[EOS]",
                                           "<end_of_turn>")}


def test_gguf_metadata_reader(synthetic_ggufs: dict[str, Path]) -> None:
    meta = read_metadata(synthetic_ggufs["llama"])
    assert meta["general.architecture"] == "llama"
    assert meta["tokenizer.ggml.tokens"] == SPM_TOKENS
    assert meta["tokenizer.ggml.token_type"] == SPM_TYPES
    assert meta["tokenizer.ggml.eos_token_id"] == 2
    assert meta["tokenizer.chat_template"] == "{{ messages }}"
    assert meta["test.floats"] == [1.5, -2.0]
    header = read_header(synthetic_ggufs["llama"])
    assert header.version == 3 and header.tensor_count == 0
    # no tensors: only the alignment padding (32 bytes by default) follows the key/values
    size = synthetic_ggufs["llama"].stat().st_size
    assert header.data_offset <= size < header.data_offset + 32


def test_gguf_metadata_of_smollm2(smollm2_gguf: Path) -> None:
    meta = read_metadata(smollm2_gguf)
    assert meta["tokenizer.ggml.model"] == "gpt2"
    assert meta["tokenizer.ggml.bos_token_id"] == 1
    assert meta["tokenizer.chat_template"].startswith("{% for message in messages %}")
    assert len(meta["tokenizer.ggml.merges"]) == 48900


def test_gguf_big_endian(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "be.gguf"
    w = gguf.GGUFWriter(str(path), "llama", endianess=gguf.GGUFEndian.BIG)
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "▁x", "</s>"])
    w.add_token_types([2, 1, 3])
    w.add_eos_token_id(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    vocab = Vocabulary.from_file(path)
    assert vocab.tokens == (b"<unk>", b" x", b"</s>") and vocab.eos_ids == {2}


def _llama_style_tokenizer_json(tmp_path: Path, fused: bool) -> tuple[Path, object]:
    """A SentencePiece-style tokenizer.json (▁ for spaces, <0xNN> byte fallback).

    With ``fused`` the decoder is Llama's (Replace, ByteFallback, Fuse, Strip: only the
    first space of the text is stripped); without, Strip trims every token.
    """
    tokenizers = pytest.importorskip("tokenizers")
    dec = tokenizers.decoders
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    for piece in ["▁", "▁hello", "world", "▁▁", "é", "h", "e", "l", "o", "▁h", "w", "r", "d",
                  "a▁", "▁a▁"]:
        vocab[piece] = len(vocab)
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, [], unk_token="<unk>",
                                                     byte_fallback=True))
    steps = [dec.Replace("▁", " "), dec.ByteFallback(), dec.Fuse(), dec.Strip(" ", 1, 0)]
    tok.decoder = dec.Sequence(steps if fused else [steps[0], steps[1], steps[3]])
    tok.add_special_tokens([tokenizers.AddedToken("<|im_end|>", special=True)])
    tok.add_tokens([tokenizers.AddedToken(" <tool>", special=False, normalized=False)])
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path, tok


@pytest.mark.parametrize("fused", [True, False])
def test_sentencepiece_style_tokenizer_json(tmp_path: Path, fused: bool) -> None:
    path, tok = _llama_style_tokenizer_json(tmp_path, fused)
    vocab = Vocabulary.from_file(path)
    assert vocab.size == tok.get_vocab_size(with_added_tokens=True)
    prefix = tok.encode("hello", add_special_tokens=False).ids
    base = tok.decode(prefix, skip_special_tokens=False)
    added = tok.get_added_tokens_decoder()  # literal text, see test_added_tokens_are_literal
    for i in range(vocab.size):
        want = vocab.token_bytes(i)
        if i in added or (len(want) == 1 and want[0] >= 0x80):
            continue
        got = tok.decode(prefix + [i], skip_special_tokens=False)
        assert got.startswith(base) and got[len(base):].encode() == want, (i, got)
    at = tok.token_to_id
    assert vocab.token_bytes(at("<0x0A>")) == b"\n"
    assert vocab.token_bytes(at("▁▁")) == (b"  " if fused else b" ")
    assert vocab.token_bytes(at("a▁")) == b"a "
    assert vocab.token_bytes(at(" <tool>")) == b" <tool>" and not vocab.is_special(at(" <tool>"))
    assert vocab.is_eos(at("<|im_end|>"))
    # <unk>/<s>/</s> are plain vocab entries in this file; unfused, "▁" and <0x20> are
    # stripped to nothing, and a token with no bytes counts as a control token
    empty = set() if fused else {at("▁"), at("<0x20>")}
    assert set(np.flatnonzero(vocab.special).tolist()) == {at("<|im_end|>")} | empty


def test_added_tokens_are_literal(tmp_path: Path) -> None:
    """Added tokens keep their text; they are not read as byte-level strings.

    (The tokenizers library runs added tokens through the ByteLevel decoder too, so it
    decodes an added ``"Ġfoo"`` as ``" foo"`` and ``"café"`` as ``"caf\ufffd"``; llama.cpp
    renders them literally, as tether does.)
    """
    tokenizers = pytest.importorskip("tokenizers")
    alphabet = tokenizers.pre_tokenizers.ByteLevel.alphabet()
    tok = tokenizers.Tokenizer(tokenizers.models.BPE({c: i for i, c in enumerate(alphabet)},
                                                     []))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.add_tokens([tokenizers.AddedToken(t, normalized=False)
                    for t in ("Ġfoo", "café", " bar", "<think>")])
    tok.add_special_tokens([tokenizers.AddedToken("<|end▁x|>", special=True)])
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    vocab = Vocabulary.from_file(path)
    at = tok.token_to_id
    for text in ("Ġfoo", "café", " bar", "<think>"):
        assert vocab.token_bytes(at(text)) == text.encode() and not vocab.is_special(at(text))
    assert vocab.token_bytes(at("<|end▁x|>")) == "<|end▁x|>".encode()
    assert vocab.is_special(at("<|end▁x|>")) and not vocab.eos_ids
    assert vocab.token_bytes(at("Ġ")) == b" " and vocab.size == 256 + 5


# == bad input ===================================================================================
def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "tokenizer.json"
    with pytest.raises(VocabularyError, match="nope/tokenizer.json"):
        Vocabulary.from_file(missing)


@pytest.mark.parametrize("cut", [0, 3, 8, 23, 100, 5000, 1_000_000])
def test_truncated_gguf(smollm2_gguf: Path, tmp_path: Path, cut: int) -> None:
    path = tmp_path / "cut.gguf"
    with smollm2_gguf.open("rb") as f:
        path.write_bytes(f.read(cut))
    with pytest.raises(VocabularyError, match=r"cut\.gguf.*byte offset \d+") as info:
        Vocabulary.from_file(path)
    if cut >= 5000:
        assert "tokenizer.ggml." in str(info.value)  # names the key being read


@pytest.mark.parametrize("text, where", [
    ('{"model": {"type": "BPE", "vocab": {"a": 0}', "line 1 column"),
    ("\x00\x01garbage", "line 1 column 1"),
    ('{"model": {"type": "BPE", "vocab": {"a": "x"}}}', "model.vocab['a']"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"id": 1}]}',
     "added_tokens[0]"),
    ('{"model": {"type": "WordPiece", "vocab": {"a": 0}}}', "model.type"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0}}, "decoder": {"type": "Nope"}}',
     "decoder"),
    ("[1, 2, 3]", "neither"),
])
def test_garbage_tokenizer_json(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(VocabularyError) as info:
        Vocabulary.from_file(path)
    assert str(path) in str(info.value) and where in str(info.value)


def test_garbage_tiktoken_and_sentencepiece(tmp_path: Path) -> None:
    tik = tmp_path / "x.tiktoken"
    tik.write_bytes(b"IQ== 0\nIg== 1\n%%%% 2\n")
    with pytest.raises(VocabularyError, match=r"x\.tiktoken.*byte offset 14"):
        Vocabulary.from_file(tik)
    model = tmp_path / "x.model"
    model.write_bytes(b"\x0a\x05\x0a\x03abc\x0a\x09\x0a\x07")  # second piece cut short
    with pytest.raises(VocabularyError, match=r"x\.model.*byte offset 7"):
        Vocabulary.from_file(model)
    empty = tmp_path / "empty.model"
    empty.write_bytes(b"")
    with pytest.raises(VocabularyError, match="empty.model"):
        Vocabulary.from_file(empty)


def _tiny_gguf_bytes() -> bytes:
    """A small valid GGUF (v3, little endian) written by hand."""
    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    tokens = ["<unk>", "<s>", "</s>", "▁a", "b", "<0x0A>"]
    kv = [
        s("tokenizer.ggml.model") + struct.pack("<I", 8) + s("llama"),
        s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens))
        + b"".join(s(t) for t in tokens),
        s("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, len(tokens))
        + struct.pack(f"<{len(tokens)}i", 2, 3, 3, 1, 1, 6),
        s("tokenizer.ggml.eos_token_id") + struct.pack("<II", 4, 2),
    ]
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv)


def test_hand_written_gguf(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(_tiny_gguf_bytes())
    vocab = Vocabulary.from_file(path)
    assert vocab.tokens == (b"<unk>", b"<s>", b"</s>", b" a", b"b", b"\n")
    assert vocab.eos_ids == {2} and vocab.special.tolist() == [1, 1, 1, 0, 0, 0]


@settings(max_examples=int(os.environ.get("TETHER_FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_gguf_and_sentencepiece_raise_only_vocabulary_errors(tmp_path: Path,
                                                                    data: st.DataObject) -> None:
    base = data.draw(st.sampled_from([_tiny_gguf_bytes(), _tiny_sentencepiece_bytes()]))
    cut = data.draw(st.integers(0, len(base)))
    blob = bytearray(base[:cut])
    for _ in range(data.draw(st.integers(0, 3))):
        if blob:
            blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path / ("f.gguf" if base.startswith(b"GGUF") else "f.model")
    path.write_bytes(bytes(blob))
    try:
        vocab = Vocabulary.from_file(path)
    except VocabularyError as e:
        assert str(path) in str(e)
    else:
        assert vocab.size >= 1


_TINY_TOKENIZER_JSON = {
    "version": "1.0",
    "added_tokens": [{"id": 3, "content": "<|end|>", "special": True},
                     {"id": 4, "content": "<t>", "special": False}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "vocab": {"a": 0, "▁b": 1, "<0x0A>": 2}, "merges": [],
              "byte_fallback": True},
}
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 1 << 40) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=6)


def _json_paths(node: object, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(node, dict):
        out += [p for k, v in node.items() for p in _json_paths(v, (*path, k))]
    elif isinstance(node, list):
        out += [p for i, v in enumerate(node) for p in _json_paths(v, (*path, i))]
    return out


@settings(max_examples=int(os.environ.get("TETHER_FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_tokenizer_json_raises_only_vocabulary_errors(tmp_path: Path,
                                                             data: st.DataObject) -> None:
    doc = json.loads(json.dumps(_TINY_TOKENIZER_JSON))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_json_paths(doc)[1:]))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = data.draw(_JSON_VALUES)
    file = tmp_path / "tokenizer.json"
    file.write_text(json.dumps(doc), encoding="utf-8")
    try:
        vocab = Vocabulary.from_file(file)
    except VocabularyError as e:
        assert str(file) in str(e)
    else:
        assert vocab.size >= 1


def test_tiny_tokenizer_json(tmp_path: Path) -> None:
    file = tmp_path / "tokenizer.json"
    file.write_text(json.dumps(_TINY_TOKENIZER_JSON), encoding="utf-8")
    vocab = Vocabulary.from_file(file)
    assert vocab.tokens == (b"a", b" b", b"\n", b"<|end|>", b"<t>")
    assert vocab.eos_ids == {3}


def _tiny_sentencepiece_bytes() -> bytes:
    """A small ModelProto written by hand: pieces with types, and a trainer spec."""
    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    def piece(text: str, kind: int) -> bytes:
        return field(1, field(1, text.encode()) + b"\x15" + struct.pack("<f", -1.0)
                     + bytes([0x18, kind]))

    pieces = [("<unk>", 2), ("<s>", 3), ("</s>", 3), ("<0x41>", 6), ("▁hi", 1), ("x", 4)]
    trainer = field(2, bytes([0xD0, 0x02, 2]))  # field 42 (eos_id) = 2
    return b"".join(piece(t, k) for t, k in pieces) + trainer


def test_hand_written_sentencepiece(tmp_path: Path) -> None:
    path = tmp_path / "tiny.model"
    path.write_bytes(_tiny_sentencepiece_bytes())
    vocab = Vocabulary.from_file(path)
    assert vocab.tokens == (b"<unk>", b"<s>", b"</s>", b"A", b" hi", b"x")
    assert vocab.eos_ids == {2} and vocab.special.tolist() == [1, 1, 1, 0, 0, 0]


# == load times ===================================================================================
def test_report_load_times(smollm2: Vocabulary, deepseek: Vocabulary, cl100k: Vocabulary,
                           mistral: Vocabulary) -> None:
    print("\nvocabulary load times (this machine):")
    for label, seconds in sorted(LOAD_SECONDS.items()):
        print(f"  {label:32s} {seconds * 1000:8.1f} ms")
    assert LOAD_SECONDS
