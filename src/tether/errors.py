"""The typed errors tether raises.

Every error is a :class:`TetherError`. Errors about malformed input carry the place
where the input is wrong (a column in a regex, a JSON pointer in a schema, a
``line:column`` in a grammar or program) so a user can fix it without guessing.
"""

from __future__ import annotations


class TetherError(Exception):
    """Base class of every error tether raises on purpose."""


class CompileError(TetherError):
    """A constraint source could not be compiled.

    ``location`` names the place: a 1-based column for a regex, a JSON pointer for a
    schema, ``line:column`` for a grammar. ``source`` is the text that was compiled.
    """

    def __init__(self, message: str, *, location: str | int | None = None,
                 source: str | None = None) -> None:
        self.message = message
        self.location = location
        self.source = source
        where = f" at {_where(location)}" if location is not None else ""
        super().__init__(f"{message}{where}")


class LimitExceeded(CompileError):
    """A bound (automaton states, repetition size, cache size) was exceeded."""


class VocabularyError(TetherError):
    """A tokenizer file or object could not be read as a vocabulary."""


class ConstraintViolation(TetherError):
    """A token was consumed that the constraint does not allow; the state is unchanged."""

    def __init__(self, message: str, *, token: int | None = None) -> None:
        self.token = token
        super().__init__(message)


class NoLegalContinuation(TetherError):
    """No token is allowed at this step (an empty mask)."""


class BudgetTooSmall(TetherError):
    """``max_tokens`` (or the context window) is below the shortest completion of the
    constraint: no run could end inside the constraint. Raised before generating."""

    def __init__(self, message: str, *, needed: int) -> None:
        super().__init__(message)
        self.needed = needed


class ModelError(TetherError):
    """The language model could not be found, loaded or run."""


def _where(location: str | int) -> str:
    if isinstance(location, int):
        return f"column {location}"
    return location or "/ (the whole schema)"  # "" is the root's JSON pointer


class TokenIdError(TetherError, IndexError):
    """A token id outside the vocabulary."""
