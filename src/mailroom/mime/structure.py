"""The MIME tree of a parsed message: part numbers, payload decoding, body and attachment choice.

Part numbers follow IMAP BODYSTRUCTURE: a single-part message's body is ``"1"``; the children
of a multipart are numbered from 1 under their parent's number (``"2"``, ``"2.1"``). A
``message/*`` part (e.g. a forwarded ``message/rfc822``) is a leaf here: it is an attachment,
and its inner parts are not walked.

Body selection is the JMAP algorithm (RFC 8621 section 4.1.4, ``parseStructure``): it yields
the text/plain parts for ``text_body`` (text/html stands in where an alternative has no plain
part) and the text/html parts for ``html_body`` (text/plain stands in likewise).

A leaf is an attachment when it is not used as a text/html body part and it has a filename,
or ``Content-Disposition: attachment``, or a type other than text/plain and text/html (inline
``cid:`` images in ``multipart/related`` are attachments with disposition ``inline``).

Limits (each exceeded limit adds a note): at most :data:`MAX_PARTS` parts are walked and at most
:data:`MAX_DEPTH` levels of multipart nesting; deeper or further parts are ignored.

Invariants: nothing here raises for a part; a failing part is skipped with a note.
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass
from email.message import Message
from urllib.parse import unquote_to_bytes

from mailroom.mime.charsets import clean_text, decode_bytes
from mailroom.mime.headers import b64decode_lenient, decode_encoded_words, raw_header_text
from mailroom.mime.msgids import normalize_message_id

__all__ = [
    "MAX_DEPTH",
    "MAX_PARTS",
    "Part",
    "build_tree",
    "content_id",
    "header_params",
    "iter_parts",
    "jmap_bodies",
    "part_text",
    "payload_bytes",
    "select_bodies",
]

MAX_PARTS = 1000
MAX_DEPTH = 32
MAX_FILENAME = 255

_TEXT_TYPES = ("text/plain", "text/html")
_INLINE_MEDIA = ("image/", "audio/", "video/")
_FILENAME_JUNK_RE = re.compile(r"[\x00-\x1f\x7f]+")
_CTE_RE = re.compile(r"[^\s;]+")
_TOKEN = r"[A-Za-z0-9!#$%&'*+.^_`{|}~-]+"
_CTYPE_RE = re.compile(rf"\s*[\"']?({_TOKEN})\s*/\s*({_TOKEN})")
_PARAM_RE = re.compile(r';\s*([^\s=;"]+)\s*=\s*("(?:[^"\\]|\\.)*"?|[^;]*)', re.DOTALL)
_PARAM_KEY_RE = re.compile(r"([^*]+)(?:\*([0-9]{1,3}))?(\*)?")


@dataclass(slots=True, eq=False)
class Part:
    """One node of the MIME tree."""

    msg: Message
    path: str
    ctype: str
    disposition: str | None
    filename: str | None
    children: list[Part] | None
    cte: str = ""
    charset: str | None = None
    content_id_raw: str | None = None
    payload: bytes | None = None  # decoded payload, filled lazily
    text: str | None = None  # decoded text, filled lazily

    @property
    def where(self) -> str:
        """Prefix for notes about this part."""
        return f"part {self.path}: " if self.path else "message: "


_MIME_HEADERS = frozenset(
    {"content-type", "content-disposition", "content-transfer-encoding", "content-id"}
)


def _mime_headers(msg: Message) -> dict[str, str]:
    """First raw values of the Content-* headers, 8-bit bytes decoded, unfolded."""
    found: dict[str, str] = {}
    for key, value in msg.raw_items():
        lkey = key.lower()
        if lkey in _MIME_HEADERS and lkey not in found:
            found[lkey] = raw_header_text(str(value)[:16384])[0]
    return found


def _content_type(msg: Message, value: str | None) -> str:
    if value is None:
        return msg.get_default_type()
    m = _CTYPE_RE.match(value)
    if m is None:
        return "text/plain"  # RFC 2045 section 5.2: an invalid Content-Type means text/plain
    return f"{m.group(1)}/{m.group(2)}".lower()


def _disposition(value: str | None) -> str | None:
    if value is None:
        return None
    disp = value.split(";", 1)[0].strip().strip("\"'").lower()
    if disp.startswith("attach"):
        return "attachment"
    if disp == "inline":
        return "inline"
    return None


def header_params(value: str) -> dict[str, str]:
    """Parameters of a Content-Type / Content-Disposition value, names lower-cased.

    Quoted strings are unquoted (only ``\\"`` and ``\\\\`` are unescaped, so unescaped
    Windows paths survive); RFC 2231 values (``name*=charset'lang'%XX``) and continuations
    (``name*0*=...; name*1=...``) are joined and decoded, and win over a plain value.
    """
    semi = value.find(";")
    if semi < 0:
        return {}
    plain: dict[str, str] = {}
    sections: dict[str, list[tuple[int, bool, str]]] = {}
    for m in _PARAM_RE.finditer(value, semi):
        raw = m.group(2).strip()
        if raw.startswith('"'):
            raw = raw[1:-1] if len(raw) > 1 and raw.endswith('"') else raw[1:]
            raw = raw.replace('\\"', '"').replace("\\\\", "\\")
        key = _PARAM_KEY_RE.fullmatch(m.group(1).lower())
        if key is None:
            continue
        base, index, star = key.groups()
        if index is None and star is None:
            plain.setdefault(base, raw)
        else:
            sections.setdefault(base, []).append((int(index or 0), bool(star), raw))
    for base, parts in sections.items():
        parts.sort(key=lambda section: section[0])
        charset: str | None = None
        chunks: list[bytes] = []
        for i, (_index, encoded, raw) in enumerate(parts):
            if encoded:
                if i == 0 and raw.count("'") >= 2:
                    charset, _language, raw = raw.split("'", 2)
                chunks.append(unquote_to_bytes(raw))
            else:
                chunks.append(raw.encode("utf-8"))
        plain[base] = decode_bytes(b"".join(chunks), charset or "utf-8")[0]
    return plain


def _filename(found: dict[str, str], notes: list[str], where: str) -> str | None:
    raw = header_params(found.get("content-disposition", "")).get("filename")
    if raw is None:
        raw = header_params(found.get("content-type", "")).get("name")
    if raw is None:
        return None
    name = decode_encoded_words(raw, notes, where)
    name = _FILENAME_JUNK_RE.sub(" ", name)
    # keep only the last path component: "../../x" and "C:\\x" are not ours to honour
    name = name.replace("\\", "/").rsplit("/", 1)[-1].strip().strip(".").strip()
    if not name:
        return None
    return clean_text(name[:MAX_FILENAME])


def _make_part(msg: Message, path: str, notes: list[str]) -> Part:
    where = f"part {path}: " if path else "message: "
    found = _mime_headers(msg)
    cte_match = _CTE_RE.search(found.get("content-transfer-encoding", ""))
    ctype = _content_type(msg, found.get("content-type"))
    charset = None
    if ctype.startswith("text/") and "charset" in found.get("content-type", "").lower():
        charset = header_params(found["content-type"]).get("charset")
    return Part(
        msg=msg,
        path=path,
        ctype=ctype,
        charset=charset,
        disposition=_disposition(found.get("content-disposition")),
        filename=_filename(found, notes, where),
        children=None,
        cte=cte_match.group().lower().strip("\"'") if cte_match else "",
        content_id_raw=found.get("content-id"),
    )


def build_tree(msg: Message, notes: list[str]) -> Part:
    """Build the :class:`Part` tree of ``msg`` with IMAP part numbers, within the limits."""
    count = 0
    root = _make_part(msg, "", notes)
    if not root.ctype.startswith("multipart/"):
        root.path = "1"
    stack: list[tuple[Part, int]] = [(root, 0)]
    too_deep = too_many = False
    while stack:
        node, depth = stack.pop()
        payload = getattr(node.msg, "_payload", None)
        if not node.ctype.startswith("multipart/"):
            continue
        if not isinstance(payload, list):
            notes.append(f"{node.where}multipart without usable boundary, read as plain text")
            node.ctype = "text/plain"
            if node is root:
                root.path = "1"
            continue
        if depth >= MAX_DEPTH:
            too_deep = True
            node.children = []
            continue
        children: list[Part] = []
        for i, sub in enumerate(payload, 1):
            if count >= MAX_PARTS:
                too_many = True
                break
            if not isinstance(sub, Message):
                continue
            count += 1
            path = f"{node.path}.{i}" if node.path else str(i)
            try:
                child = _make_part(sub, path, notes)
            except Exception as exc:
                notes.append(f"part {path}: unreadable ({type(exc).__name__}), skipped")
                continue
            children.append(child)
            stack.append((child, depth + 1))
        node.children = children
    if too_deep:
        notes.append(f"MIME: nesting deeper than {MAX_DEPTH} levels, deeper parts ignored")
    if too_many:
        notes.append(f"MIME: more than {MAX_PARTS} parts, the rest ignored")
    return root


def iter_parts(root: Part) -> list[Part]:
    """All parts of the tree in document order (pre-order)."""
    out: list[Part] = []
    stack = [root]
    while stack:
        node = stack.pop()
        out.append(node)
        if node.children:
            stack.extend(reversed(node.children))
    return out


def _decode_uu(data: bytes) -> bytes:
    out: list[bytes] = []
    started = False
    for line in data.splitlines():
        if not started:
            if line.startswith(b"begin "):
                started = True
            continue
        if line.strip() == b"end":
            break
        if not line.strip():
            continue
        try:
            out.append(binascii.a2b_uu(line))
        except binascii.Error:
            try:
                nbytes = (((line[0] - 32) & 63) * 4 + 5) // 3
                out.append(binascii.a2b_uu(line[:nbytes]))
            except (binascii.Error, IndexError):
                continue
    return b"".join(out)


def payload_bytes(part: Part, notes: list[str]) -> bytes:
    """The decoded payload of a leaf part (for ``message/*`` parts: the embedded bytes)."""
    if part.payload is not None:
        return part.payload
    data: bytes
    # The raw payload: get_payload() would already have decoded 8-bit text with "replace".
    payload = getattr(part.msg, "_payload", None)
    if isinstance(payload, list):
        chunks: list[bytes] = []
        for sub in payload:
            if isinstance(sub, Message):
                try:
                    chunks.append(sub.as_bytes())
                except Exception:
                    notes.append(f"{part.where}embedded message could not be re-serialized")
        data = b"".join(chunks)
    else:
        raw: bytes
        if isinstance(payload, bytes | bytearray):
            raw = bytes(payload)
        else:
            text = payload if isinstance(payload, str) else str(payload or "")
            try:
                raw = text.encode("ascii", "surrogateescape")
            except UnicodeEncodeError:
                raw = text.encode("utf-8", "surrogateescape")
        cte = part.cte
        if cte == "base64":
            data, repaired = b64decode_lenient(raw)
            if repaired:
                notes.append(f"{part.where}damaged base64 repaired")
        elif cte == "quoted-printable":
            data = binascii.a2b_qp(raw)
        elif cte in ("x-uuencode", "uuencode", "uue", "x-uue"):
            data = _decode_uu(raw)
        else:
            if cte not in ("", "7bit", "8bit", "binary"):
                notes.append(f"{part.where}unknown transfer encoding {cte[:40]!r}, used as is")
            data = raw
    part.payload = data
    return data


def part_text(part: Part, notes: list[str]) -> str:
    """The decoded text of a leaf text part, line endings normalized to ``\\n``."""
    if part.text is not None:
        return part.text
    data = payload_bytes(part, notes)
    text, note = decode_bytes(data, part.charset)
    if note is not None:
        notes.append(f"{part.where}{note}")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    part.text = text
    return text


def _parse_structure(
    parts: list[Part],
    multipart_type: str,
    in_alternative: bool,
    html_body: list[Part] | None,
    text_body: list[Part] | None,
    attachments: list[Part],
) -> None:
    """RFC 8621 section 4.1.4 ``parseStructure``, transcribed."""
    text_length = len(text_body) if text_body is not None else -1
    html_length = len(html_body) if html_body is not None else -1
    for i, part in enumerate(parts):
        is_multipart = part.children is not None
        inline_media = part.ctype.startswith(_INLINE_MEDIA)
        is_inline = (
            part.disposition != "attachment"
            and (part.ctype in _TEXT_TYPES or inline_media)
            and (i == 0 or (multipart_type != "related" and (inline_media or not part.filename)))
        )
        if is_multipart:
            sub_type = part.ctype.split("/", 1)[1]
            _parse_structure(
                part.children or [],
                sub_type,
                in_alternative or sub_type == "alternative",
                html_body,
                text_body,
                attachments,
            )
        elif is_inline:
            if multipart_type == "alternative":
                if part.ctype == "text/plain" and text_body is not None:
                    text_body.append(part)
                elif part.ctype == "text/html" and html_body is not None:
                    html_body.append(part)
                else:
                    attachments.append(part)
                continue
            if in_alternative:
                if part.ctype == "text/plain":
                    html_body = None
                if part.ctype == "text/html":
                    text_body = None
            if text_body is not None:
                text_body.append(part)
            if html_body is not None:
                html_body.append(part)
            if (text_body is None or html_body is None) and inline_media:
                attachments.append(part)
        else:
            attachments.append(part)
    if multipart_type == "alternative" and text_body is not None and html_body is not None:
        if text_length == len(text_body) and html_length != len(html_body):
            text_body.extend(html_body[html_length:])
        if html_length == len(html_body) and text_length != len(text_body):
            html_body.extend(text_body[text_length:])


def jmap_bodies(root: Part) -> tuple[list[Part], list[Part], list[Part]]:
    """(textBody, htmlBody, attachments) exactly as RFC 8621 section 4.1.4 ``parseStructure``.

    Inline images, audio and video of a mixed part inside an alternative are
    in a body list *and* in the attachments, as the RFC's algorithm puts them.
    """
    html_body: list[Part] = []
    text_body: list[Part] = []
    attachments: list[Part] = []
    _parse_structure([root], "mixed", False, html_body, text_body, attachments)
    return text_body, html_body, attachments


def select_bodies(root: Part) -> tuple[list[Part], list[Part], list[Part]]:
    """Return (text body parts, html body parts, attachment parts), each in document order.

    Body lists hold only text/plain and text/html leaves; see the module docstring for which
    leaves are attachments.
    """
    text_body, html_body, _attachments = jmap_bodies(root)
    text_parts = [p for p in text_body if p.ctype in _TEXT_TYPES]
    html_parts = [p for p in html_body if p.ctype in _TEXT_TYPES]
    used = {id(p) for p in text_parts} | {id(p) for p in html_parts}
    attachments = [
        p
        for p in iter_parts(root)
        if p.children is None
        and id(p) not in used
        and (p.filename or p.disposition == "attachment" or p.ctype not in _TEXT_TYPES)
    ]
    return text_parts, html_parts, attachments


def content_id(part: Part) -> str | None:
    """The part's Content-ID, normalized like a message id."""
    value = part.content_id_raw
    return None if value is None else normalize_message_id(value)
