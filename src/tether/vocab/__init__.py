"""Vocabularies (SPEC §2): the exact bytes of every token, its flags, and the byte trie
that every constraint compiled for the vocabulary shares."""

from tether.vocab.trie import TokenTrie
from tether.vocab.vocabulary import Vocabulary

__all__ = ["TokenTrie", "Vocabulary"]
