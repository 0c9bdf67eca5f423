"""The constraint sources a user can compile (SPEC §3).

These are plain, hashable descriptions; :func:`tether.compile` turns one into a
:class:`~tether.engine.compiled.Compiled` for a given vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tether.errors import CompileError


@dataclass(frozen=True)
class Regex:
    """Text that fully matches ``pattern`` (Python ``re`` syntax, over UTF-8 bytes).

    ``dotall=True`` lets ``.`` match a newline too, as ``re.DOTALL`` does.
    """

    pattern: str
    dotall: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str):
            raise CompileError(f"a regex pattern must be a str, not {type(self.pattern).__name__}")


@dataclass(frozen=True)
class Choices:
    """Exactly one of the given strings."""

    options: tuple[str, ...]

    def __init__(self, options: Iterable[str]) -> None:
        opts = tuple(options)
        if not opts:
            raise CompileError("Choices needs at least one option")
        for i, o in enumerate(opts):
            if not isinstance(o, str):
                raise CompileError(f"choice {i} must be a str, not {type(o).__name__}",
                                   location=f"/{i}")
        object.__setattr__(self, "options", opts)


Constraint = Regex | Choices
