"""The terminals a Lark grammar can ``%import common.NAME``, written from their meaning.

Each is a regular expression in our regex syntax (see
:mod:`tether.automata.regex_parser`); its language is every string the regex matches in
full. Numbers and names follow their usual programming-language forms; strings are
double-quoted, without raw line breaks, with any backslash escape inside.
"""

from __future__ import annotations

_INT = r"[0-9]+"
_SIGNED = r"[+-]?"
_EXPONENT = r"[eE][+-]?[0-9]+"
_DECIMAL = rf"(?:{_INT}\.(?:{_INT})?|\.{_INT})"
_FLOAT = rf"(?:{_INT}{_EXPONENT}|{_DECIMAL}(?:{_EXPONENT})?)"
_NUMBER = rf"(?:{_FLOAT}|{_INT})"

COMMON_TERMINALS: dict[str, str] = {
    # digits and numbers
    "DIGIT": r"[0-9]",
    "HEXDIGIT": r"[0-9a-fA-F]",
    "INT": _INT,
    "SIGNED_INT": _SIGNED + _INT,
    "DECIMAL": _DECIMAL,
    "FLOAT": _FLOAT,
    "SIGNED_FLOAT": _SIGNED + _FLOAT,
    "NUMBER": _NUMBER,
    "SIGNED_NUMBER": _SIGNED + _NUMBER,
    # strings: a backslash escapes any character but a line break
    "ESCAPED_STRING": r'"(?:[^"\\\n]|\\[^\n])*"',
    # letters and names (ASCII)
    "LCASE_LETTER": r"[a-z]",
    "UCASE_LETTER": r"[A-Z]",
    "LETTER": r"[a-zA-Z]",
    "WORD": r"[a-zA-Z]+",
    "CNAME": r"[a-zA-Z_][a-zA-Z0-9_]*",
    # blanks and line breaks
    "WS_INLINE": r"[ \t]+",
    "WS": r"[ \t\f\r\n]+",
    "CR": r"\r",
    "LF": r"\n",
    "NEWLINE": r"(?:\r?\n)+",
    # comments, up to (not including) the line break that ends them
    "SH_COMMENT": r"#[^\n]*",
    "CPP_COMMENT": r"//[^\n]*",
    "C_COMMENT": r"/\*(?:[^*]|\*+[^*/])*\*+/",
    "SQL_COMMENT": r"--[^\n]*",
}
