"""`PhaseDetector`: which phase the generation is in, from the text generated so far
(CRANE-style adaptive switching, SPEC §7), fed incrementally, one piece at a time.

The output is reasoning (prose, or ``<think>…</think>``) until the delimiter that opens
the structured part: a code-fence line such as ```` ```json ```` from prose, or
``</think>``. Inside ``<think>…</think>`` only ``</think>`` ends reasoning. Once a
delimiter is complete the phase is ``TRANSITION`` (nothing of the structured part is
generated yet) and ``STRUCTURED_OUTPUT`` from the next byte on, for good;
``structured_start`` is where the structured part begins. A delimiter only counts once it
is complete, so prose that merely starts like one (an inline ```` `code` ````) stays
reasoning and is never blocked.

With a ``reasoning_prefix``, the output is reasoning only if it starts with a match:
while it still may (unsure), the phase is ``TRANSITION`` — which acts as structured
output — and once it cannot, ``STRUCTURED_OUTPUT`` from byte 0. With adaptive switching
off the phase is always ``STRUCTURED_OUTPUT``.

Delimiters are regexes in tether's own syntax, searched with byte DFAs built by
:mod:`tether.automata` (one step per byte, no rescanning).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from tether.automata.dfa import DEAD, LazyDFA
from tether.automata.nfa import build_nfa
from tether.automata.regex_ast import MAX_CODEPOINT, CharSet, Concat, Repeat, normalize
from tether.automata.regex_parser import parse_regex
from tether.fusion.config import Delimiters, FusionConfig
from tether.fusion.domains import Phase
from tether.fusion.errors import FusionConfigError

MAX_DELIMITER_STATES = 4096

_PREFIX, _PROSE, _THINK, _STRUCTURED = "prefix", "prose", "think", "structured"
_ANY = Repeat(CharSet(normalize([(0, MAX_CODEPOINT)])), 0, None)


@lru_cache(maxsize=64)
def _dfa(pattern: str, search: bool) -> LazyDFA:
    """The DFA of ``pattern`` (``search``: of any text ending with a match), built whole
    so that stepping it never mutates it."""
    node = parse_regex(pattern)
    dfa = LazyDFA(build_nfa(Concat((_ANY, node)) if search else node, source=pattern),
                  source=pattern)
    if not dfa.materialize(MAX_DELIMITER_STATES):
        raise FusionConfigError(f"the delimiter {pattern!r} needs more than "
                                f"{MAX_DELIMITER_STATES} DFA states", pointer="/delimiters")
    return dfa


@dataclass
class _Searcher:
    """Finds the first end of a match of one delimiter in a stream of bytes."""

    dfa: LazyDFA
    state: int

    def step(self, byte: int) -> bool:
        state = self.dfa.step(self.state, byte)
        self.state = state if state != DEAD else self.dfa.start  # skip invalid UTF-8
        return bool(self.dfa.accepting[self.state])

    def reset(self) -> None:
        self.state = self.dfa.start


class PhaseDetector:
    """Feed the generated text; read the phase the next token is in."""

    def __init__(self, config: FusionConfig | None = None) -> None:
        config = config or FusionConfig()
        delims: Delimiters = config.delimiters
        self._text = bytearray()
        self._history: list[tuple] = []
        self.structured_start: int | None = None
        self._opened_by_delimiter = False
        self._fence = _searcher(delims.fence_open)
        self._think_open = _searcher(delims.think_open)
        self._think_close = _searcher(delims.think_close)
        self._prefix = None if delims.reasoning_prefix is None else _dfa(
            delims.reasoning_prefix, False)
        self._prefix_state = self._prefix.start if self._prefix is not None else DEAD
        if not config.adaptive_switching:
            self._mode = _STRUCTURED
            self.structured_start = 0
        elif self._prefix is not None:
            self._mode = _PREFIX
            self._check_prefix(0)
        else:
            self._mode = _PROSE

    @property
    def phase(self) -> Phase:
        """The phase of the next token."""
        if self._mode in (_PROSE, _THINK):
            return Phase.REASONING
        if self._mode == _PREFIX:
            return Phase.TRANSITION
        if self._opened_by_delimiter and self.structured_start == len(self._text):
            return Phase.TRANSITION
        return Phase.STRUCTURED_OUTPUT

    @property
    def text(self) -> bytes:
        """Everything fed so far."""
        return bytes(self._text)

    def feed(self, piece: str | bytes) -> Phase:
        """Add generated text (a token's bytes, or any piece); return the new phase."""
        data = piece.encode() if isinstance(piece, str) else bytes(piece)
        self._history.append(self._snapshot())
        for byte in data:
            self._text.append(byte)
            self._step(byte)
        return self.phase

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` calls to :meth:`feed`."""
        if not 0 <= n <= len(self._history):
            raise ValueError(f"cannot roll back {n} pieces: {len(self._history)} fed")
        if n:
            self._restore(self._history[-n])
            del self._history[-n:]

    def fork(self) -> PhaseDetector:
        """An independent copy (same text and phase)."""
        twin = object.__new__(PhaseDetector)
        twin.__dict__.update(self.__dict__)
        twin._text = bytearray(self._text)
        twin._history = list(self._history)
        for name in ("_fence", "_think_open", "_think_close"):
            s = getattr(self, name)
            setattr(twin, name, None if s is None else _Searcher(s.dfa, s.state))
        return twin

    # -- the state machine ---------------------------------------------------------------
    def _step(self, byte: int) -> None:
        if self._mode == _PREFIX:
            self._prefix_state = self._prefix.step(self._prefix_state, byte)
            self._check_prefix(len(self._text))
        elif self._mode == _PROSE:
            ends = _hit(self._think_close, byte) | _hit(self._fence, byte)
            if _hit(self._think_open, byte) and not ends:
                self._mode = _THINK
                _reset(self._think_close)
            elif ends:
                self._open_structured()
        elif self._mode == _THINK and _hit(self._think_close, byte):
            self._open_structured()

    def _check_prefix(self, at: int) -> None:
        if self._prefix_state == DEAD:
            self._mode = _STRUCTURED
            self.structured_start = 0
        elif self._prefix.accepting[self._prefix_state]:
            self._mode = _PROSE
            seen = bytes(self._text[:at])
            for s in (self._fence, self._think_open, self._think_close):
                _reset(s)
            self._text = bytearray()
            for byte in seen:  # the prefix may itself open <think>
                self._text.append(byte)
                self._step(byte)

    def _open_structured(self) -> None:
        self._mode = _STRUCTURED
        self.structured_start = len(self._text)
        self._opened_by_delimiter = True

    def _snapshot(self) -> tuple:
        return (len(self._text), self._mode, self._prefix_state, self.structured_start,
                self._opened_by_delimiter,
                tuple(None if s is None else s.state
                      for s in (self._fence, self._think_open, self._think_close)))

    def _restore(self, snap: tuple) -> None:
        size, self._mode, self._prefix_state, self.structured_start, \
            self._opened_by_delimiter, states = snap
        del self._text[size:]
        for s, state in zip((self._fence, self._think_open, self._think_close), states,
                            strict=True):
            if s is not None:
                s.state = state


def _searcher(pattern: str | None) -> _Searcher | None:
    if pattern is None:
        return None
    dfa = _dfa(pattern, True)
    return _Searcher(dfa, dfa.start)


def _hit(searcher: _Searcher | None, byte: int) -> bool:
    return searcher is not None and searcher.step(byte)


def _reset(searcher: _Searcher | None) -> None:
    if searcher is not None:
        searcher.reset()
