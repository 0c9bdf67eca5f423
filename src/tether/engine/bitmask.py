"""The Bitmask format (SPEC §1) and conversions.

One bit per token id, packed little-endian into ``uint32`` words: ``ceil(V / 32)`` words,
bit ``i % 32`` of word ``i // 32`` is token ``i`` — the layout XGrammar and llguidance use
and vLLM/SGLang consume. Batched masks are ``(batch, words)`` arrays. Bits past ``V`` are
always zero.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
    raise ImportError("tether's Bitmask packing assumes a little-endian machine")


def n_words(vocab_size: int) -> int:
    """Number of uint32 words of a mask over ``vocab_size`` tokens."""
    return (vocab_size + 31) // 32


def from_bool(allowed: np.ndarray) -> np.ndarray:
    """Pack a bool array (one entry per token, last axis) into Bitmask words."""
    allowed = np.asarray(allowed, dtype=bool)
    size = allowed.shape[-1]
    pad = n_words(size) * 32 - size
    if pad:
        widths = [(0, 0)] * (allowed.ndim - 1) + [(0, pad)]
        allowed = np.pad(allowed, widths)
    return np.packbits(allowed, axis=-1, bitorder="little").view(np.uint32)


def from_ids(ids: Any, vocab_size: int) -> np.ndarray:
    """A mask allowing exactly the token ids ``ids``."""
    allowed = np.zeros(vocab_size, dtype=bool)
    allowed[np.asarray(ids, dtype=np.int64)] = True
    return from_bool(allowed)


def to_bool(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """Unpack Bitmask words (last axis) into a bool array of ``vocab_size`` entries."""
    words = np.ascontiguousarray(words, dtype=np.uint32)
    bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
    return bits[..., :vocab_size].astype(bool)


def to_ids(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """The sorted token ids a (single) mask allows."""
    return np.flatnonzero(to_bool(words, vocab_size))


def to_additive(words: np.ndarray, vocab_size: int, dtype: Any = np.float32) -> np.ndarray:
    """An additive logit mask: 0 where allowed, ``-inf`` elsewhere."""
    return np.where(to_bool(words, vocab_size), 0.0, -np.inf).astype(dtype)


def to_additive_torch(words: np.ndarray, vocab_size: int, device: Any = None,
                      dtype: Any = None) -> Any:
    """:func:`to_additive` as a torch tensor (torch is imported lazily)."""
    import torch

    return torch.from_numpy(to_additive(words, vocab_size)).to(
        device=device, dtype=dtype or torch.float32)


def popcount(words: np.ndarray) -> int:
    """Number of allowed tokens."""
    return int(np.unpackbits(np.ascontiguousarray(words, dtype=np.uint32).view(np.uint8)).sum())


def is_allowed(words: np.ndarray, token_id: int) -> bool:
    """Whether ``token_id`` is allowed by the (single) mask ``words``."""
    return bool((int(words[token_id >> 5]) >> (token_id & 31)) & 1)


def apply_to_logits(logits: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Copy of ``logits`` with every disallowed token set to ``-inf``.

    ``logits`` may be longer than the mask (a model whose output layer is padded past
    the tokenizer's vocabulary): the extra entries are disallowed.
    """
    out = np.array(logits, dtype=np.float32, copy=True)
    allowed = to_bool(words, min(out.shape[-1], words.shape[-1] * 32))
    out[..., : allowed.shape[-1]][~allowed] = -np.inf
    out[..., allowed.shape[-1]:] = -np.inf
    return out
