"""The HTML a message's sandboxed frame shows: sanitized mail, remote images held back.

Remote images are tracking pixels as often as pictures, and loading one tells
the sender that (and when, and from where) the mail was read. So the frame
shows none until the user says so, for this message or always for its sender
(:mod:`mailroom.web.prefs`): a blocked image loses its ``src`` here, on the
server, so the browser never even tries (the frame's own CSP would refuse it
anyway, but a refused load still costs a console error per image). Once
allowed, the image loads straight from the sender's server — the one external
request the page ever makes, and only after the user asked for it
(:data:`FRAME_CSP_IMAGES`).

Inline ``cid:`` images name a part of the same message; they become
``data:`` URLs of that part (raster types only, as the sanitizer allows), since
a sandboxed frame cannot send the session cookie for a URL of ours.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass

from mailroom.mime.sanitize import rewrite_images

# default-src 'none': nothing loads but what is listed; mail's inline styles are kept
# (the sanitizer leaves only harmless properties). ``sandbox`` here too, so the frame
# stays sandboxed even when opened on its own; allow-same-origin (never with
# allow-scripts) only lets the thread page's script measure the frame's height.
_FRAME_BASE = (
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'; "
    "form-action 'none'; base-uri 'none'; "
    "sandbox allow-same-origin allow-popups allow-popups-to-escape-sandbox"
)
FRAME_CSP = f"{_FRAME_BASE}; img-src data:"
FRAME_CSP_IMAGES = f"{_FRAME_BASE}; img-src data: https: http:"
INLINE_TYPES = frozenset({"image/png", "image/gif", "image/jpeg", "image/webp"})
INLINE_LIMIT = 5 * 1024 * 1024  # bytes of inline images turned into data: URLs per message


@dataclass(frozen=True, slots=True)
class FrameHtml:
    """A message's frame document and how many remote images it holds back."""

    html: str
    blocked: int


def remote(url: str) -> bool:
    """Whether an image URL loads from another server."""
    return url.strip().lower().startswith(("http:", "https:"))


def frame_html(
    sanitized: str,
    *,
    show_remote: bool,
    inline: Mapping[str, tuple[str, bytes]] | None = None,
) -> FrameHtml:
    """The frame's HTML from a message's sanitized HTML.

    ``inline`` maps a Content-ID (without brackets) to (content type, bytes)
    of the message's parts; remote images are dropped unless ``show_remote``.
    """
    blocked = 0
    budget = [INLINE_LIMIT]

    def replace(url: str) -> str | None:
        nonlocal blocked
        if remote(url):
            if show_remote:
                return url
            blocked += 1
            return None
        if url.lower().startswith("cid:"):
            return _inline_url(url[4:].strip().strip("<>"), inline or {}, budget)
        return url

    html = rewrite_images(sanitized, replace)
    return FrameHtml(_document(html), blocked)


def _inline_url(cid: str, inline: Mapping[str, tuple[str, bytes]], budget: list[int]) -> str | None:
    found = inline.get(cid)
    if found is None or found[0] not in INLINE_TYPES or len(found[1]) > budget[0]:
        return None
    budget[0] -= len(found[1])
    return f"data:{found[0]};base64,{base64.b64encode(found[1]).decode('ascii')}"


def _document(body: str) -> str:
    """A whole document, so the frame renders in standards mode with a readable default."""
    return (
        '<!doctype html><html><head><meta charset="utf-8">'
        '<meta name="color-scheme" content="light">'
        "<style>html,body{margin:0;padding:0}body{font:15px/1.45 system-ui,sans-serif;"
        "color:#1d2330;overflow-wrap:anywhere;padding:2px}img{max-width:100%;height:auto}"
        "table{max-width:100%}pre{white-space:pre-wrap}</style></head>"
        f"<body>{body}</body></html>"
    )


def wants_inline(sanitized: str) -> bool:
    """Whether the sanitized HTML names inline parts (so the raw message must be read)."""
    return 'src="cid:' in sanitized
