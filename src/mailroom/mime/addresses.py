"""Address headers (From, To, Cc, ...) to :class:`Address` records, tolerant of real-world junk.

The parser is our own small tokenizer rather than ``email.utils.getaddresses``, whose results
for malformed input changed between Python patch releases. It accepts RFC 5322 address lists
and the usual breakage: unquoted commas-free display names, ``joe@example.com (Joe)``,
``Joe joe@example.com``, unterminated quotes and angle brackets, groups
(``undisclosed-recipients:;``), ``mailto:`` prefixes, obsolete source routes, encoded words in
quoted display names.

Invariants:
    * :func:`parse_address_list` never raises.
    * Addresses are parsed on the raw value *before* RFC 2047 decoding, so an encoded comma in a
      display name cannot split an address; display names are decoded afterwards.
    * ``Address.email`` is never empty (empty results are dropped), holds no whitespace, and
      its domain part (after the last ``@``) is lower-cased; the local part keeps its case.
    * A mailbox without ``@`` is kept only when it is a single bare word (``MAILER-DAEMON``)
      or was written in angle brackets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mailroom.mime.headers import decode_encoded_words

__all__ = ["Address", "parse_address_list", "normalize_email"]

#: At most this many addresses are returned from one header value.
MAX_ADDRESSES = 2000


@dataclass(frozen=True, slots=True)
class Address:
    """One mailbox: RFC 2047-decoded display name ("" if none) and addr-spec."""

    name: str
    email: str

    def pair(self) -> tuple[str, str]:
        """(name, email)."""
        return (self.name, self.email)


_TOKEN_RE = re.compile(
    r"""
      (?P<q>"(?:[^"\\]|\\.)*"|"[^"<]*)   # quoted string; an unterminated one stops at "<"
    | (?P<c>\((?:[^()\\]|\\.)*\)?)       # comment (nesting is not tracked)
    | (?P<a><[^<>]*>?)                   # angle-addr, possibly unterminated
    | (?P<s>[,;:])                       # separators
    | (?P<w>[^\s",;:<>()]+)              # atom / dot-atom / bare addr-spec
    | (?P<ws>\s+)
    | (?P<x>[>)])                        # stray closers
    """,
    re.VERBOSE | re.DOTALL,
)
_WS_RE = re.compile(r"\s+")
# One plain mailbox: ``Name <a@b>``, ``"Name" <a@b>``, ``<a@b>`` or ``a@b`` (the common case).
_SIMPLE_RE = re.compile(
    r"""\s*(?:
        (?:"(?P<q>[^"\\]*)"|(?P<p>[^"<>,;:()\\@]*?))\s*<(?P<a>[^<>\s"(),;:\\]+@[^<>\s"(),;:\\]+)>
      | (?P<b>[^<>\s"(),;:\\]+@[^<>\s"(),;:\\]+)
    )\s*""",
    re.VERBOSE,
)
_QUOTED_PAIR_RE = re.compile(r"\\(.)", re.DOTALL)
_QUOTED_LOCAL_RE = re.compile(r'\s*<?\s*("(?:[^"\\]|\\.)*")(\s*@[^>]*)>?\s*$', re.DOTALL)


def normalize_email(value: str) -> str:
    """Clean an addr-spec: strip whitespace, ``mailto:`` and source routes; lower-case domain."""
    # whitespace is junk (folding), except inside a quoted local part
    m = _QUOTED_LOCAL_RE.match(value)
    if m is not None:
        email = m.group(1) + _WS_RE.sub("", m.group(2))
    else:
        email = _WS_RE.sub("", value).strip("<>")
    if email[:7].lower() == "mailto:":
        email = email[7:]
    if email.startswith("@") and ":" in email:  # obsolete source route "@a,@b:user@host"
        email = email.split(":", 1)[1]
    local, at, domain = email.rpartition("@")
    if at:
        email = f"{local}@{domain.lower()}"
    return email.strip(".,;")


def _display_name(words: list[str]) -> str:
    name = " ".join(words)
    name = decode_encoded_words(name)
    return " ".join(name.split())


class _Builder:
    __slots__ = ("words", "quoted", "comments", "angle", "out")

    def __init__(self) -> None:
        self.words: list[str] = []
        self.quoted: list[bool] = []
        self.comments: list[str] = []
        self.angle: str | None = None
        self.out: list[Address] = []

    def reset(self) -> None:
        """Forget the mailbox being collected."""
        self.words = []
        self.quoted = []
        self.comments = []
        self.angle = None

    def flush(self) -> None:
        """Turn the collected words, comments and angle-addr into an Address, if any."""
        words, quoted, comments, angle = self.words, self.quoted, self.comments, self.angle
        self.reset()
        if angle is not None:
            email = normalize_email(angle)
            name_words = words or comments
        else:
            idx = next(
                (i for i, w in enumerate(words) if "@" in w and not quoted[i]),
                next((i for i, w in enumerate(words) if "@" in w), -1),
            )
            bare = [w for i, w in enumerate(words) if "@" in w and not quoted[i]]
            if len(bare) > 1:  # "a@x b@y": several addresses with the commas missing
                for w in bare:
                    email = normalize_email(w)
                    if email and len(self.out) < MAX_ADDRESSES:
                        self.out.append(Address(name="", email=email))
                return
            if idx >= 0:
                email = normalize_email(words[idx])
                name_words = words[:idx] + words[idx + 1 :] or comments
            elif len(words) == 1 and not quoted[0]:
                email = normalize_email(words[0])
                name_words = comments
            else:
                return
        if not email or len(self.out) >= MAX_ADDRESSES:
            return
        self.out.append(Address(name=_display_name(name_words), email=email))


def parse_address_list(value: str | None) -> list[Address]:
    """Parse an address-list header value (raw, encoded words not yet decoded) into addresses.

    Never raises; unparseable pieces are skipped. Group names are dropped, their members kept.
    """
    if not value:
        return []
    try:
        m = _SIMPLE_RE.fullmatch(value)
        if m is not None:
            bare = m.group("b")
            if bare is not None:
                return [Address(name="", email=normalize_email(bare))]
            name = m.group("q") if m.group("q") is not None else m.group("p")
            email = normalize_email(m.group("a"))
            return [Address(name=_display_name([name]) if name else "", email=email)]
        return _parse(value)
    except Exception:  # pragma: no cover - defensive
        return []


def _parse(value: str) -> list[Address]:
    b = _Builder()
    for m in _TOKEN_RE.finditer(value):
        kind = m.lastgroup
        tok = m.group()
        if kind == "w":
            glued = m.start() > 0 and value[m.start() - 1] == '"'
            if tok.startswith("@") and b.words and b.quoted[-1] and glued:
                # "quoted local"@domain
                b.words[-1] = '"' + b.words[-1] + '"' + tok
                b.quoted[-1] = False
            else:
                b.words.append(tok)
                b.quoted.append(False)
        elif kind == "q":
            inner = tok[1:-1] if len(tok) > 1 and tok.endswith('"') else tok[1:]
            b.words.append(_QUOTED_PAIR_RE.sub(r"\1", inner))
            b.quoted.append(True)
        elif kind == "a":
            inner = tok[1:-1] if tok.endswith(">") else tok[1:]
            if b.angle is not None:
                b.flush()
            b.angle = inner
        elif kind == "c":
            inner = tok[1:-1] if len(tok) > 1 and tok.endswith(")") else tok[1:]
            inner = inner.strip()
            if inner:
                b.comments.append(inner)
        elif kind == "s":
            if tok == ":":
                if b.angle is None:
                    b.reset()  # group display name (or a "mailto:" prefix): drop it
            else:
                b.flush()
        if len(b.out) >= MAX_ADDRESSES:
            break
    b.flush()
    return b.out
