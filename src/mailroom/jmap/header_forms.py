"""Header fields as JMAP reads them (RFC 8621 §4.1.2, §4.1.3): raw values and parsed forms.

A property ``header:{name}[:{form}][:all]`` names one header field, one form
(``asRaw`` when none is given) and whether every instance is wanted (``:all``:
a list, in message order, ``[]`` when there is none) or only the last one
(``null`` when there is none). Field names are case-insensitive.

The raw value is what follows the colon up to the terminating CRLF, with the
leading space, the folding and any encoded words kept. :data:`RAW_POLICY` makes
the stdlib parser keep it so (``compat32`` strips the leading space); octets
that are not UTF-8 become U+FFFD and NUL octets are dropped.

Each parsed form may only be asked of the fields RFC 8621 lists for it, or of
a field that neither RFC 5322 nor RFC 2369 defines (any form is allowed
there); anything else is ``invalidArguments``. Parsing never fails a request:
a value that does not parse is ``null`` (``[]`` for the address forms).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import Message
from email.policy import Compat32
from email.utils import parsedate_to_datetime
from typing import Any

from mailroom.jmap.errors import invalid_arguments
from mailroom.mime.addresses import parse_address_list
from mailroom.mime.headers import decode_encoded_words
from mailroom.mime.msgids import parse_id_list

FORMS = frozenset(
    {"asRaw", "asText", "asAddresses", "asGroupedAddresses", "asMessageIds", "asDate", "asURLs"}
)
_ADDRESS_FIELDS = frozenset(
    {
        "from",
        "sender",
        "reply-to",
        "to",
        "cc",
        "bcc",
        "resent-from",
        "resent-sender",
        "resent-reply-to",
        "resent-to",
        "resent-cc",
        "resent-bcc",
    }
)
# The fields RFC 5322 defines ("resent-reply-to" is not one of them).
_RFC5322_FIELDS = (_ADDRESS_FIELDS - {"resent-reply-to"}) | {
    "date",
    "message-id",
    "in-reply-to",
    "references",
    "subject",
    "comments",
    "keywords",
    "resent-date",
    "resent-message-id",
    "return-path",
    "received",
}
_RFC2369_FIELDS = frozenset(
    {"list-help", "list-unsubscribe", "list-subscribe", "list-post", "list-owner", "list-archive"}
)
# The fields of RFC 5322 and RFC 2369 each form may be read from (RFC 8621 §4.1.2.2-7).
_ALLOWED = {
    "asText": frozenset({"subject", "comments", "keywords", "list-id"}),
    "asAddresses": _ADDRESS_FIELDS,
    "asGroupedAddresses": _ADDRESS_FIELDS,
    "asMessageIds": frozenset({"message-id", "in-reply-to", "references", "resent-message-id"}),
    "asDate": frozenset({"date", "resent-date"}),
    "asURLs": _RFC2369_FIELDS,
}
# RFC 5322 field-name: printable US-ASCII except colon.
_FIELD_NAME_RE = re.compile(r"[!-9;-~]+")
_FOLD_RE = re.compile(r"\r?\n(?=[ \t])")
_LINE_END_RE = re.compile(r"[\r\n]")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_URL_RE = re.compile(r"<([^<>]*)>")
_WORDS_RE = re.compile(r"(\s+)")
_ENCODED_WORD_RE = re.compile(r"=\?[^?\s*]+(?:\*[^?\s]*)?\?[bBqQ]\?[^?\s]*\?=")


class RawHeaderPolicy(Compat32):
    """``compat32`` keeping each header value exactly as sent after the colon."""

    def header_source_parse(self, sourcelines: list[str]) -> tuple[str, str]:
        """Name and raw value: the leading space and the folding stay, the final CRLF goes."""
        name, value = sourcelines[0].split(":", 1)
        value += "".join(sourcelines[1:])
        if value.endswith("\r\n"):
            value = value[:-2]
        elif value.endswith(("\n", "\r")):
            value = value[:-1]
        return name, value

    def fold(self, name: str, value: str) -> str:
        """The field as it came (a forwarded message's blob is re-serialized through this)."""
        return f"{name}:{value}{self.linesep}"

    def fold_binary(self, name: str, value: str) -> bytes:
        """:meth:`fold` as the original octets."""
        return self.fold(name, value).encode("ascii", "surrogateescape")


RAW_POLICY = RawHeaderPolicy(linesep="\r\n", mangle_from_=False)


@dataclass(frozen=True, slots=True)
class HeaderProperty:
    """A parsed ``header:`` property: lower-case field name, form and ``:all``."""

    field: str
    form: str
    every: bool

    def pick(self, fields: Iterable[tuple[str, str]]) -> Any:
        """This property's value from (name, raw value) pairs in message order."""
        values = [value for name, value in fields if name.lower() == self.field]
        if self.every:
            return [parsed_value(value, self.form) for value in values]
        return parsed_value(values[-1], self.form) if values else None


def header_property(name: str) -> HeaderProperty:
    """Parse ``header:Name[:form][:all]``; invalidArguments for a bad one or a form not allowed."""
    parts = name.split(":")
    if len(parts) < 2 or _FIELD_NAME_RE.fullmatch(parts[1]) is None:
        raise invalid_arguments(f"Bad header property {name!r}.")
    field, rest = parts[1].lower(), parts[2:]
    every = bool(rest) and rest[-1] == "all"
    if every:
        rest = rest[:-1]
    form = rest[0] if rest else "asRaw"
    if len(rest) > 1 or form not in FORMS:
        raise invalid_arguments(f"Unknown header form in {name!r}.")
    if not form_allowed(field, form):
        raise invalid_arguments(f"The form {form} is not allowed for the {parts[1]} header.")
    return HeaderProperty(field, form, every)


def form_allowed(field: str, form: str) -> bool:
    """Whether RFC 8621 §4.1.2 lets this form be read from (or set on) this field."""
    allowed = _ALLOWED.get(form)
    if allowed is None:
        return form in FORMS
    known = field.lower() in _RFC5322_FIELDS or field.lower() in _RFC2369_FIELDS
    return not known or field.lower() in allowed


def raw_text(value: str) -> str:
    """A header value from the parser as JMAP Raw text (8-bit octets as UTF-8, no NUL)."""
    if not value.isascii():
        value = value.encode("ascii", "surrogateescape").decode("utf-8", "replace")
    return value.replace("\x00", "")


def raw_fields(msg: Message) -> list[tuple[str, str]]:
    """The (name, raw value) pairs of a message or part parsed with :data:`RAW_POLICY`."""
    return [(name, raw_text(str(value))) for name, value in msg.raw_items()]


def _unfolded(raw: str) -> str:
    return _LINE_END_RE.sub("", _FOLD_RE.sub("", raw))


def _decode_placed_words(text: str) -> str:
    """Decode the encoded words that RFC 2047 §5 places correctly; leave any other text alone.

    In unstructured text an encoded word stands between white space (or the
    ends of the value); white space between two of them is dropped. A word
    glued to other text, or holding a space, is not an encoded word and stays.
    """
    out: list[str] = []
    run: list[str] = []  # encoded words and the white space between them

    def flush() -> None:
        tail = run.pop() if run and run[-1].isspace() else ""
        if run:
            out.append(decode_encoded_words("".join(run)))
        out.append(tail)
        run.clear()

    for token in _WORDS_RE.split(text):
        if _ENCODED_WORD_RE.fullmatch(token) or (run and token.isspace()):
            run.append(token)
        else:
            flush()
            out.append(token)
    flush()
    return "".join(out)


def as_text(raw: str) -> str:
    """The Text form: unfolded, leading spaces removed, encoded words decoded, NFC."""
    text = _decode_placed_words(_unfolded(raw).lstrip(" "))
    return unicodedata.normalize("NFC", _CONTROL_RE.sub("", text))


def as_addresses(raw: str) -> list[dict[str, Any]]:
    """The Addresses form: every mailbox, groups flattened."""
    return [{"name": a.name or None, "email": a.email} for a in parse_address_list(raw)]


def _groups(value: str) -> list[tuple[str | None, str]]:
    """Split an address list into (group name or None, its addresses) at top-level ``:``/``;``."""
    out: list[tuple[str | None, str]] = []
    start, depth, quoted, angle, group = 0, 0, False, False, None
    i = 0
    while i < len(value):
        char = value[i]
        if quoted:
            if char == "\\":
                i += 1
            elif char == '"':
                quoted = False
        elif depth:
            if char == "\\":
                i += 1
            elif char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
        elif char == '"':
            quoted = True
        elif char == "(":
            depth = 1
        elif char == "<":
            angle = True
        elif char == ">":
            angle = False
        elif char == ":" and not angle and group is None:
            if value[start:i].strip():
                name = as_text(value[start:i]).strip().strip('"').strip()
                group, start = name, i + 1
        elif char == ";" and not angle and group is not None:
            out.append((group, value[start:i]))
            group, start = None, i + 1
        i += 1
    out.append((group, value[start:]))
    return out


def as_grouped_addresses(raw: str) -> list[dict[str, Any]]:
    """The GroupedAddresses form: groups in order; runs of ungrouped mailboxes in a null group."""
    out: list[dict[str, Any]] = []
    for name, members in _groups(_unfolded(raw)):
        addresses = as_addresses(members)
        if name is None:
            if not addresses:
                continue
            if out and out[-1]["name"] is None:
                out[-1]["addresses"].extend(addresses)
                continue
        out.append({"name": name, "addresses": addresses})
    return out


def as_message_ids(raw: str) -> list[str] | None:
    """The MessageIds form: ids without angle brackets or CFWS; null when none parse."""
    return parse_id_list(_unfolded(raw)) or None


def as_date(raw: str) -> str | None:
    """The Date form: RFC 3339 keeping the sender's offset ("Z" for +0000 and -0000)."""
    try:
        moment = parsedate_to_datetime(_unfolded(raw).strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return rfc3339(moment)


def rfc3339(moment: datetime) -> str:
    """A JMAP Date: ``2014-10-30T14:12:00+08:00``, or ``…Z`` at UTC (a naive time is UTC)."""
    offset = moment.utcoffset() if moment.tzinfo is not None else None
    stamp = moment.replace(tzinfo=None, microsecond=0).isoformat()
    if not offset:
        return f"{stamp}Z"
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{stamp}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def as_urls(raw: str) -> list[str] | None:
    """The URLs form (RFC 2369): each ``<url>`` without brackets or whitespace; null if none."""
    without_comments = re.sub(r"\([^()]*\)", "", _unfolded(raw))
    urls = ["".join(url.split()) for url in _URL_RE.findall(without_comments)]
    return [url for url in urls if url] or None


def parsed_value(raw: str, form: str) -> Any:
    """One raw header value in one form."""
    if form == "asRaw":
        return raw
    if form == "asText":
        return as_text(raw)
    if form == "asAddresses":
        return as_addresses(_unfolded(raw))
    if form == "asGroupedAddresses":
        return as_grouped_addresses(raw)
    if form == "asMessageIds":
        return as_message_ids(raw)
    if form == "asDate":
        return as_date(raw)
    return as_urls(raw)
