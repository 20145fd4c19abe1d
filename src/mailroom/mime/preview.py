"""Short one-line previews of a message body, as shown in a message list.

Rules, in order:
    1. The source is ``text`` when it has any non-space content, else the text of ``html``.
    2. Only the first :data:`SCAN_LIMIT` characters are looked at, so huge bodies cost nothing.
    3. Quoted lines (starting with ``>`` after optional spaces) are dropped, as is an attribution
       line ending in ``wrote:`` (or ``schrieb:``/``a écrit :``) that introduces them.
    4. Everything from a signature separator (a line that is ``--`` or ``-- ``) or a forwarded /
       original-message marker (``-----Original Message-----``, ``----- Forwarded message``,
       an Outlook ``____`` rule followed by ``From:``) onward is dropped.
    5. If that leaves nothing, the untrimmed text is used instead (a message that is only a
       quote still gets a preview).
    6. All whitespace runs become one space; the result is cut to at most ``limit`` characters,
       ending with ``…`` when cut (at a word boundary when one is near).

Invariants: :func:`make_preview` never raises and ``len(result) <= max(limit, 0)``.
"""

from __future__ import annotations

import re

from mailroom.mime.htmltext import html_to_text

__all__ = ["make_preview", "SCAN_LIMIT"]

#: Characters of the body that are scanned for a preview.
SCAN_LIMIT = 16384

_ATTRIBUTION_RE = re.compile(
    r"(wrote|schrieb|écrit|escribió|scrisse|schreef|napisał)\s*:\s*$", re.IGNORECASE
)
_CUT_RE = re.compile(
    r"^(?:-- ?|--|-{2,}\s*(?:original message|forwarded message|begin forwarded message|"
    r"urspr[üu]ngliche nachricht|message d'origine)\b.*|begin forwarded message:.*)$",
    re.IGNORECASE,
)
_OUTLOOK_RULE_RE = re.compile(r"^_{10,}\s*$")
_FROM_LINE_RE = re.compile(r"^(?:from|von|de|da)\s*:", re.IGNORECASE)


def _trim(text: str, budget: int) -> str:
    """Apply rules 3 and 4; stop early once ``budget`` characters of text are kept."""
    lines = text.splitlines()
    kept: list[str] = []
    kept_len = 0
    for i, line in enumerate(lines):
        if kept_len > budget:
            break
        stripped = line.strip()
        if _CUT_RE.match(stripped):
            break
        if _OUTLOOK_RULE_RE.match(stripped):
            following = next((x for x in lines[i + 1 : i + 4] if x.strip()), "")
            if _FROM_LINE_RE.match(following.strip()):
                break
        if stripped.startswith(">"):
            # drop the attribution line that introduced this quote
            while kept and not kept[-1].strip():
                kept.pop()
            if kept and _ATTRIBUTION_RE.search(kept[-1]):
                kept_len -= len(kept.pop())
            continue
        kept.append(line)
        kept_len += len(line)
    return " ".join(" ".join(kept).split())


def make_preview(text: str | None, html: str | None = None, limit: int = 256) -> str:
    """Return a whitespace-collapsed preview of at most ``limit`` characters (see module rules).

    ``text`` is the plain body; ``html`` is used only when ``text`` is empty or blank.
    """
    try:
        if limit <= 0:
            return ""
        source = text if text is not None and text.strip() else None
        if source is None:
            source = html_to_text(html[: SCAN_LIMIT * 8]) if html else ""
        source = source[:SCAN_LIMIT]
        result = _trim(source, 2 * limit + 64) or " ".join(source[: 4 * limit + 64].split())
        if len(result) <= limit:
            return result
        cut = result[: limit - 1]
        space = cut.rfind(" ")
        if space >= limit * 3 // 4:
            cut = cut[:space]
        return cut.rstrip() + "…"
    except Exception:
        return ""
