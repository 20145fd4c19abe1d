"""The base subject of RFC 5256 section 2.1, which the JMAP ``subject`` sort uses.

Stored subjects are already decoded (RFC 2047 words are text), so step 1 is
only the whitespace folding. The steps then strip trailers ("(fwd)" and
white space), leaders ("Re:", "Fw:", "Fwd:", each possibly after and with
"[blob]" parts), a leading "[blob]" that does not leave the subject empty,
and a whole "[fwd: ...]" wrapper, repeating until nothing changes.
"""

from __future__ import annotations

import re

_WHITESPACE = re.compile(r"[ \t\r\n]+")
_TRAILER = re.compile(r"(?:\(fwd\)|[ \t])$", re.IGNORECASE)
_BLOB = r"\[[^\[\]]*\][ \t]*"
_LEADER = re.compile(rf"(?:(?:{_BLOB})*(?:re|fwd?)[ \t]*(?:{_BLOB})?:|[ \t])", re.IGNORECASE)
_LEADING_BLOB = re.compile(_BLOB)
_FWD_HEADER = "[fwd:"


def _strip_trailers(text: str) -> str:
    while (match := _TRAILER.search(text)) is not None:
        text = text[: match.start()]
    return text


def _strip_leaders(text: str) -> str:
    while True:
        changed = False
        while (match := _LEADER.match(text)) is not None:
            text = text[match.end() :]
            changed = True
        blob = _LEADING_BLOB.match(text)
        if blob is not None and text[blob.end() :]:
            text = text[blob.end() :]
            changed = True
        if not changed:
            return text


def base_subject(subject: str) -> str:
    """The subject without reply and forward markers, list tags and extra white space."""
    text = _WHITESPACE.sub(" ", subject)
    while True:
        text = _strip_leaders(_strip_trailers(text))
        if text[: len(_FWD_HEADER)].lower() == _FWD_HEADER and text.endswith("]"):
            text = text[len(_FWD_HEADER) : -1]
            continue
        return text
