"""Ready-made grammars: constraints for languages users ask for by name."""

from __future__ import annotations

from importlib.resources import files

from tether.constraints import Grammar

# A module of our own that compiling python() walks (Grammar's ``warm_up``): statements
# and expressions real code uses, so that their masks' pieces are ready before the first
# request (docs/grammars.md, "Warm-up").
_SAMPLE = "python_sample.py.txt"

# The Markdown code block around a module (``python(fenced=True)``): the opening line, the
# module (whose last line ends with a line break, so the closing fence is at column 0
# after a complete statement, every block closed) and the closing fence, optionally
# followed by one line break. Both fence terminals may end a line, so the layout adds no
# ignored blanks after them: the constraint is finished right after the fence.
_FENCED = r'''
fenced: _FENCE_OPEN start _FENCE_CLOSE
_FENCE_OPEN: "```python\n"
_FENCE_CLOSE: /```(\r?\n)?/
'''


def python(*, indent: str = "    ", max_depth: int = 16, fenced: bool = False) -> Grammar:
    """Python 3 source (the statements and expressions real modules use) as a
    constraint: a Lark grammar whose layout — blocks indented by ``indent``, at most
    ``max_depth`` deep, free line breaks inside brackets — is resolved by
    :mod:`tether.grammar.layout`. Known differences from Python are listed at the top of
    ``python.lark``.

    ``fenced=True``: the module inside a Markdown code block, as chat models write code —
    ``"```python\\n"``, the module, then ``"```"`` at the start of a line after a complete
    statement (optionally followed by one line break). The closing fence completes the
    constraint, so generation stops there (stop reason ``constraint_complete``, or
    ``eog`` if the model ends right after the fence)."""
    text = files("tether.grammars").joinpath("python.lark").read_text(encoding="utf-8")
    sample = _reindented(files("tether.grammars").joinpath(_SAMPLE).read_text(
        encoding="utf-8"), indent)
    # Names, their keywords and strings are matched longest, as Python's tokenizer reads
    # them: `xif` is one name, not `x if`; `insert` is not `in sert`; `"""` opens a long
    # string.
    longest = ("NAME", "STRING", "EMPTY_STRING")
    if fenced:
        return Grammar(text + _FENCED, syntax="lark", start="fenced", indent=indent,
                       max_depth=max_depth, longest=longest, language="python",
                       warm_up=f"```python\n{sample}```\n")
    return Grammar(text, syntax="lark", indent=indent, max_depth=max_depth,
                   longest=longest, language="python", warm_up=sample)


def _reindented(module: str, indent: str) -> str:
    """``module`` (indented by four spaces a level) indented by ``indent`` a level."""
    lines = []
    for line in module.splitlines(keepends=True):
        body = line.lstrip(" ")
        lines.append(indent * ((len(line) - len(body)) // 4) + body)
    return "".join(lines)


__all__ = ["python"]
