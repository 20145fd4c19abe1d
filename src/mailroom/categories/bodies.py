"""Bulk-mail signs in a message's body: the one thing the cascade reads from the body.

Newsletters that carry no list header still look like newsletters: a "view
this email in your browser" link at the top, an unsubscribe link at the
bottom, a 1x1 tracking image, or a body that is mostly pictures.
:func:`bulk_body_sign` names the first such sign in one short phrase, or
returns "" — from the parsed message at ingest and from the stored bodies in
a recomputation, so both decide alike; only mail that reaches the bulk stage
without an earlier signal is looked at.

It stays cheap: it looks for the view-in-browser link in the first 3 KB and
the unsubscribe link in the last 8 KB only, with plain substring tests and
bounded patterns.
"""

from __future__ import annotations

import re

_HEAD = 3000
_TAIL = 8000
_VIEW_IN_BROWSER = (
    "view this email in your browser",
    "view it in your browser",
    "view in browser",
    "view online",
    "web version",
    "online version",
    "im browser ansehen",
    "im browser anzeigen",
    "webversion",
    "online ansehen",
    "version en ligne",
    "voir la version en ligne",
    "afficher dans le navigateur",
)
_UNSUBSCRIBE = (
    "unsubscribe",
    "opt out",
    "opt-out",
    "abmelden",
    "abbestellen",
    "austragen",
    "se désinscrire",
    "se desinscrire",
    "désabonner",
    "desabonner",
    "désinscription",
)
_PIXEL = re.compile(
    r"<img\b[^>]{0,400}?\b(?:width|height)\s*=\s*[\"']?[01](?:px)?[\"'\s>/][^>]{0,400}?"
    r"\b(?:width|height)\s*=\s*[\"']?[01](?:px)?[\"'\s>/]",
    re.I,
)
_MOSTLY_IMAGES = 4  # at least this many images ...
_TEXT_PER_IMAGE = 60  # ... and fewer characters of text than this per image


def bulk_body_sign(text_body: str, html_body: str | None) -> str:
    """The first bulk-mail sign in the body, as a short phrase ("" when there is none)."""
    html_body = html_body or ""
    html, text = html_body[:_HEAD].lower(), text_body[:_HEAD].lower()
    if any(phrase in html or phrase in text for phrase in _VIEW_IN_BROWSER):
        return "a view-in-browser link in the body"
    html, text = html_body[-_TAIL:].lower(), text_body[-_TAIL:].lower()
    if "<a" in html and any(word in html for word in _UNSUBSCRIBE):
        return "an unsubscribe link in the body"
    if any(word in text for word in _UNSUBSCRIBE):
        return "unsubscribe instructions in the body"
    if "<img" not in html:
        return ""
    if _PIXEL.search(html):
        return "a tracking pixel in the body"
    images = html.count("<img")
    if images >= _MOSTLY_IMAGES and len(text_body.strip()) < images * _TEXT_PER_IMAGE:
        return f"a body of {images} images and little text"
    return ""
