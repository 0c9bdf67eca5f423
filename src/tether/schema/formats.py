"""The decoded-string languages of JSON Schema ``format`` values (SPEC §5).

Each known format is a regular expression over the decoded string, written here from the
RFCs (3339 dates and times, 3986 URIs, 4291/3986 IPv6, 1123 host names) and JSON
Schema's appendix (durations). Every language is *sound* — it never contains an invalid
value — and exact except where noted:

- ``date``/``date-time``: days per month exact, 29 February only in leap years (years
  0000–9999 as RFC 3339 writes them);
- ``time``/``date-time``: the offset is required; a leap second (``:60``) is accepted only
  as ``23:59:60`` with offset ``Z`` or ``±00:00`` (RFC 3339 allows it only at 23:59:60 UTC;
  the other offsets that land there are rejected);
- ``email``: ``dot-atom@hostname`` (RFC 5322 dot-atom local part; no quoted local parts,
  no address literals);
- ``hostname``: labels of 1–63 letters, digits and inner hyphens; the 253-character
  total is guaranteed by accepting at most 4 labels of up to 62 characters or at most 16
  labels of up to 14 (names beyond both are rejected);
- ``uri``/``uri-reference``: RFC 3986 exactly (ASCII only, as the RFC says);
- ``ipv4``, ``ipv6`` (every compressed form, embedded IPv4), ``uuid``, ``duration``,
  ``json-pointer``: exact.

``relative-json-pointer`` and ``uri-template`` (RFC 6570) are exact. ``regex`` (not a
regular language), ``iri``, ``iri-reference``, ``idn-email`` and ``idn-hostname`` are
refused (:data:`UNENFORCEABLE`); formats JSON Schema does not define (OpenAPI's ``byte``,
``int32``, ``int64``, ``float``, ``double``; ``url``…) return None: annotations only, as
the specification says of unknown formats and as validators treat them.
"""

from __future__ import annotations

from functools import cache

from tether.automata.regex_ast import Node
from tether.automata.regex_parser import parse_regex
from tether.errors import CompileError

_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"


_IPV6 = "|".join([
    rf"(?:{_H16}:){{6}}{_LS32}",
    rf"::(?:{_H16}:){{5}}{_LS32}",
    rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
])

_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = (r"(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
         r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
         rf"|{_LEAP_YEAR}-02-29)")
_OFFSET = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_TIME = (r"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?" + _OFFSET
         + r"|23:59:60(?:\.[0-9]+)?(?:[Zz]|[+-]00:00))")

_DURATION = (r"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
             r"(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
             r"|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
             r"|[0-9]+W)")


def _label(longest: int) -> str:
    return rf"[A-Za-z0-9](?:[A-Za-z0-9-]{{0,{longest - 2}}}[A-Za-z0-9])?"


_HOSTNAME = (rf"(?:{_label(62)}(?:\.{_label(62)}){{0,3}}"
             rf"|{_label(14)}(?:\.{_label(14)}){{0,15}})")
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_EMAIL = rf"{_ATEXT}+(?:\.{_ATEXT}+)*@{_HOSTNAME}"

# RFC 3986, appendix A
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_SEGMENT = rf"{_PCHAR}*"
_SEGMENT_NZ = rf"{_PCHAR}+"
_SEGMENT_NZ_NC = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})+"
_IP_LITERAL = rf"\[(?:{_IPV6}|[vV][0-9A-Fa-f]+\.[{_UNRESERVED}{_SUB_DELIMS}:]+)\]"
_REG_NAME = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
_AUTHORITY = (rf"(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*@)?"
              rf"(?:{_IP_LITERAL}|{_IPV4}|{_REG_NAME})(?::[0-9]*)?")
_PATH_ABEMPTY = rf"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = rf"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_PATH_ROOTLESS = rf"{_SEGMENT_NZ}(?:/{_SEGMENT})*"
_PATH_NOSCHEME = rf"{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*"
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_TAIL = rf"(?:\?{_QUERY})?(?:#{_QUERY})?"
_URI = (rf"[A-Za-z][A-Za-z0-9+.\-]*:(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}"
        rf"|{_PATH_ROOTLESS}|){_TAIL}")
_RELATIVE_REF = (rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_NOSCHEME}|)"
                 rf"{_TAIL}")

# RFC 6570: literal characters or percent-escapes, and expressions {op varspec,...}.
_PCT = r"%[0-9A-Fa-f]{2}"
_VARCHAR = rf"(?:[A-Za-z0-9_]|{_PCT})"
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_URI_TEMPLATE = (rf"(?:[^\x00-\x20\x7f\"'%<>\\^`{{|}}]|{_PCT}"
                 rf"|\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\}})*")

_FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "duration": _DURATION,
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uri": _URI,
    "uri-reference": rf"(?:{_URI}|{_RELATIVE_REF})",
    "uuid": r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    "json-pointer": r"(?:/(?:[^/~]|~[01])*)*",
    "relative-json-pointer": r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^/~]|~[01])*)*)",
    "uri-template": _URI_TEMPLATE,
}


# Formats that validators check but whose language is not regular or not written here:
# accepting any string for them would let invalid values through, so they are refused.
UNENFORCEABLE = frozenset({"regex", "iri", "iri-reference", "idn-email", "idn-hostname"})


# The formats JSON Schema specifies (others are annotations a validator may not know)
SPEC_FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname",
    "idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid",
    "uri-template", "json-pointer", "relative-json-pointer", "regex"})


def format_expr(name: str, location: str = "") -> Node | None:
    """The decoded strings of format ``name`` (a code-point syntax tree), or None for a
    format that is an annotation only (number formats, names validators do not know).
    A format validators assert but this module cannot enforce is a :class:`CompileError`
    at ``location``."""
    if name in UNENFORCEABLE:
        raise CompileError(f"format {name!r} cannot be enforced while generating (its "
                           "language is not regular or not supported)", location=location)
    return _format_tree(name)


@cache
def _format_tree(name: str) -> Node | None:
    pattern = _FORMATS.get(name)
    return None if pattern is None else parse_regex(pattern, dotall=True)
