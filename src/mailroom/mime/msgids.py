"""Message-ID, In-Reply-To and References values to normalized id strings.

A normalized id is the text between the angle brackets with all whitespace removed, e.g.
``<abc@example.com>`` -> ``abc@example.com``. Ids are compared case-sensitively (the local part
is case-sensitive by RFC 5322), so no case folding is done.

Invariants:
    * Nothing here raises.
    * A normalized id is never empty, never contains whitespace, ``<`` or ``>``, and is at most
      :data:`MAX_ID_LENGTH` characters long (longer ones are junk and dropped).
    * :func:`parse_id_list` keeps the order of first appearance and drops duplicates. It takes
      every ``<...>`` token; only when the value has no ``<`` at all, bare tokens that contain
      ``@`` (so the mutt-style ``<id>; from joe@example.com on Mon`` yields just ``id``). Other
      words, quoted strings and comments are skipped as junk.
"""

from __future__ import annotations

import re

__all__ = ["MAX_ID_LENGTH", "normalize_message_id", "parse_id_list"]

#: Longest accepted id, in characters: the RFC 5322 line limit.
MAX_ID_LENGTH = 998

#: At most this many ids are returned by :func:`parse_id_list`.
MAX_IDS = 1000

_WS_RE = re.compile(r"\s+")
_ID_TOKEN_RE = re.compile(
    r"""
      <(?P<b>[^<>]*)>?                   # bracketed id, possibly unterminated
    | "(?:[^"\\]|\\.)*"?                 # quoted string: junk
    | \((?:[^()\\]|\\.)*\)?              # comment: junk
    | (?P<w>[^\s<>"()]+)                 # bare word
    """,
    re.VERBOSE | re.DOTALL,
)


def _clean(token: str) -> str | None:
    ident = _WS_RE.sub("", token).strip("<>")
    if not ident or len(ident) > MAX_ID_LENGTH:
        return None
    return ident


def normalize_message_id(value: str) -> str | None:
    """Normalize one Message-ID value: angle brackets and whitespace stripped, None if empty.

    If the value holds a ``<...>`` token, the first one is used (comments and junk around it are
    ignored); otherwise the whole value is the id. Ids longer than 998 characters give None.
    """
    try:
        if not value:
            return None
        start = value.find("<")
        if start >= 0:
            end = value.find(">", start + 1)
            inner = value[start + 1 :] if end < 0 else value[start + 1 : end]
            ident = _clean(inner)
            if ident is not None:
                return ident
            rest = value[:start] + ("" if end < 0 else value[end + 1 :])
            return _clean(rest)
        return _clean(value)
    except Exception:  # pragma: no cover - defensive
        return None


def parse_id_list(value: str | None) -> list[str]:
    """Parse a References / In-Reply-To value into normalized ids, in order, without duplicates.

    Junk between ids is ignored; in a value without any ``<``, bare tokens containing ``@`` are
    taken as ids.
    """
    if not value:
        return []
    try:
        seen: set[str] = set()
        out: list[str] = []
        bare_ok = "<" not in value  # "<id> from joe@x on Monday": joe@x is not an id
        for m in _ID_TOKEN_RE.finditer(value):
            bracketed = m.group("b")
            if bracketed is not None:
                ident = _clean(bracketed)
            else:
                word = m.group("w")
                if not bare_ok or word is None or "@" not in word:
                    continue
                ident = _clean(word.strip(",;"))
            if ident is not None and ident not in seen:
                seen.add(ident)
                out.append(ident)
                if len(out) >= MAX_IDS:
                    break
        return out
    except Exception:  # pragma: no cover - defensive
        return []
