"""Leading lookaheads of a ``pattern``, rewritten as patterns the automata can build.

The regex engine has no lookarounds, but a lookahead right after the pattern's leading
``^`` only asks what the string starts with, which JSON Schema can already say:
``^(?!X)REST`` holds for the strings ``^REST`` matches that ``^(?:X)`` does not (an
excluded pattern, as ``not: {pattern}`` gives), and ``^(?=X)REST`` for those both
``^REST`` and ``^(?:X)`` match. Several in a row are taken one by one. A pattern whose
rest has an alternation at its top level (the lookahead would bind to the first
alternative only), or with a lookahead anywhere else, is left as it is (and refused
where it is parsed).
"""

from __future__ import annotations


def split_lookaheads(pattern: str) -> tuple[frozenset[str], frozenset[str]]:
    """``pattern`` as (patterns every string matches, patterns no string matches)."""
    required: list[str] = []
    excluded: list[str] = []
    rest = pattern
    while rest.startswith(("^(?!", "^(?=")):
        end = _group_end(rest, 1)
        if end is None:
            return frozenset({pattern}), frozenset()
        inner, after = rest[4:end], "^" + rest[end + 1:]
        if _has_top_level_bar(after):
            return frozenset({pattern}), frozenset()
        (excluded if rest[3] == "!" else required).append(f"^(?:{inner})")
        rest = after
    if not required and not excluded:
        return frozenset({pattern}), frozenset()
    return frozenset({rest, *required}), frozenset(excluded)


def _group_end(text: str, start: int) -> int | None:
    """The index of the ``)`` closing the group opened at ``text[start]`` (escapes and
    character classes skipped), None if it is not closed."""
    depth = 0
    i = start
    in_class = False
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":  # (ECMA-262: the first unescaped ] closes it, even first)
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _has_top_level_bar(text: str) -> bool:
    """Whether ``text`` has an alternation outside every group."""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            j = i + 1
            while j < len(text) and text[j] != "]":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            end = _group_end(text, i)
            if end is None:
                return False  # malformed: the parser reports it
            i = end + 1
            continue
        if c == "|":
            return True
        i += 1
    return False
