"""HTML sanitizing for display: the output of :func:`sanitize_html` is the only HTML to render.

Policy (an allow-list, enforced by ``nh3``/ammonia, which re-serializes a parsed DOM, so
malformed markup cannot smuggle anything through):

* Tags: text formatting, headings, lists, tables, images, links, ``div``/``span``/``p``/``br``/
  ``hr``/``blockquote``/``pre``, the legacy ``font``/``center`` that mail still uses. Not
  kept: ``script``, ``style``, ``iframe``, ``frame``, ``object``, ``embed``, ``applet``,
  ``form`` and its controls, ``meta``, ``link``, ``base``, ``svg``, ``math``, ``video``,
  ``audio``, ``html``/``head``/``body`` (their content is kept, the tag is not). The *content*
  of ``script``, ``style``, ``title``, ``template``, ``iframe``, ``noembed``, ``noframes`` and
  ``xmp`` is dropped too.
* Attributes: a per-tag allow-list of presentational ones (``align``, ``width``, ``bgcolor``,
  ``colspan``, ``alt``...). No event handlers (``on*``), no ``id``/``name``/``class`` (no DOM
  clobbering, no borrowing the web app's CSS classes), no ``srcdoc``, ``formaction``,
  ``background`` or ``srcset``.
* ``style`` is kept, but only the CSS properties in :data:`STYLE_PROPERTIES` survive (nh3
  parses and re-serializes the declarations), and a declaration value mentioning ``url(``,
  ``expression``, ``javascript:``, ``behavior``, ``-moz-binding``, ``@import`` or a backslash
  escape is dropped (and the whole attribute if anything suspicious is left). No ``position``,
  so mail cannot overlay the UI.
* URLs: ``a href`` may be ``http:``, ``https:``, ``mailto:`` or ``tel:``; ``img src`` may be
  ``http:``, ``https:``, ``cid:`` (a part of the same message), or ``data:image/png|gif|jpeg|
  webp;base64`` (raster images cannot run script; ``data:image/svg+xml`` is refused). Any other
  scheme and every relative URL (which would resolve against the web app's origin) is removed.
  Remote images are kept as ``src``: blocking them until the user asks is the renderer's job.
* Every ``<a>`` gets ``rel="noopener noreferrer"`` and ``target="_blank"``.

Invariants: :func:`sanitize_html` never raises (on failure it returns the escaped text of the
input) and its output contains no element or attribute outside the allow-list above.
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Callable
from functools import partial

import nh3

__all__ = ["sanitize_html", "rewrite_images", "ALLOWED_TAGS", "STYLE_PROPERTIES"]

# fmt: off
ALLOWED_TAGS: frozenset[str] = frozenset(
    {
        "a", "abbr", "acronym", "address", "article", "aside", "b", "bdi", "bdo", "big",
        "blockquote", "br", "caption", "center", "cite", "code", "col", "colgroup", "dd", "del",
        "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "font", "footer",
        "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "i", "img", "ins", "kbd", "li",
        "main", "mark", "ol", "p", "pre", "q", "rp", "rt", "ruby", "s", "samp", "section",
        "small", "span", "strike", "strong", "sub", "summary", "sup", "table", "tbody", "td",
        "tfoot", "th", "thead", "time", "tr", "tt", "u", "ul", "var", "wbr",
    }
)

_CLEAN_CONTENT_TAGS = frozenset(
    {"script", "style", "title", "template", "iframe", "noembed", "noframes", "xmp"}
)

_GENERIC_ATTRS = {"align", "valign", "dir", "lang", "title", "style", "width", "height"}

_TAG_ATTRS: dict[str, set[str]] = {
    "*": _GENERIC_ATTRS,
    "a": {"href", "hreflang"},
    "img": {"src", "alt", "border", "hspace", "vspace"},
    "table": {"border", "cellpadding", "cellspacing", "bgcolor", "summary", "frame", "rules"},
    "tr": {"bgcolor"},
    "td": {"colspan", "rowspan", "bgcolor", "nowrap", "abbr", "scope", "headers"},
    "th": {"colspan", "rowspan", "bgcolor", "nowrap", "abbr", "scope", "headers"},
    "tbody": {"bgcolor"},
    "thead": {"bgcolor"},
    "tfoot": {"bgcolor"},
    "col": {"span", "bgcolor"},
    "colgroup": {"span"},
    "font": {"color", "face", "size"},
    "ol": {"start", "type", "reversed"},
    "ul": {"type"},
    "li": {"value", "type"},
    "hr": {"size", "noshade", "color"},
    "div": {"bgcolor"},
    "time": {"datetime"},
    "bdo": set(),
    "details": {"open"},
}

STYLE_PROPERTIES: frozenset[str] = frozenset(
    {
        "background-color", "border", "border-bottom", "border-bottom-color",
        "border-bottom-style", "border-bottom-width", "border-collapse", "border-color",
        "border-left", "border-left-color", "border-left-style", "border-left-width",
        "border-radius", "border-right", "border-right-color", "border-right-style",
        "border-right-width", "border-spacing", "border-style", "border-top", "border-top-color",
        "border-top-style", "border-top-width", "border-width", "caption-side", "clear", "color",
        "direction", "display", "empty-cells", "float", "font", "font-family", "font-size",
        "font-style", "font-variant", "font-weight", "height", "letter-spacing", "line-height",
        "list-style-position", "list-style-type", "margin", "margin-bottom", "margin-left",
        "margin-right", "margin-top", "max-height", "max-width", "min-height", "min-width",
        "overflow", "padding", "padding-bottom", "padding-left", "padding-right", "padding-top",
        "table-layout", "text-align", "text-decoration", "text-indent", "text-transform",
        "vertical-align", "visibility", "white-space", "width", "word-break", "word-spacing",
        "word-wrap", "overflow-wrap",
    }
)
# fmt: on

_HREF_SCHEMES = ("http:", "https:", "mailto:", "tel:")
_SRC_SCHEMES = ("http:", "https:", "cid:")
_DATA_IMAGE_RE = re.compile(r"^data:image/(?:png|gif|jpe?g|webp);base64,[a-z0-9+/=\s]*$", re.I)
_URL_JUNK_RE = re.compile(r"[\x00-\x20\x7f]+")
_BAD_STYLE_RE = re.compile(
    r"url\(|expression|javascript|vbscript|behavior|binding|@import|\\", re.IGNORECASE
)


def _scheme_of(value: str) -> str:
    """The URL as a browser would see its scheme: entities decoded, controls and spaces gone."""
    return _URL_JUNK_RE.sub("", _html.unescape(value)).lower()


def _filter_style(value: str) -> str | None:
    """Drop each declaration whose text looks like it could load or run something."""
    if _BAD_STYLE_RE.search(_html.unescape(value)) is None:
        return value
    kept = [d for d in value.split(";") if _BAD_STYLE_RE.search(_html.unescape(d)) is None]
    result = ";".join(kept)
    if not result.strip() or _BAD_STYLE_RE.search(_html.unescape(result)) is not None:
        return None
    return result


def _attribute_filter(tag: str, attr: str, value: str) -> str | None:
    try:
        if attr == "href":
            return value if _scheme_of(value).startswith(_HREF_SCHEMES) else None
        if attr == "src":
            url = _scheme_of(value)
            if url.startswith(_SRC_SCHEMES):
                return value
            if tag == "img" and _DATA_IMAGE_RE.match(_html.unescape(value).strip()):
                return value
            return None
        if attr == "style":
            return _filter_style(value)
        return value
    except Exception:  # pragma: no cover - never let an exception reach nh3
        return None


_URL_SCHEMES = {"http", "https", "mailto", "tel", "cid", "data"}

_KWARGS: dict[str, object] = {
    "tags": set(ALLOWED_TAGS),
    "clean_content_tags": set(_CLEAN_CONTENT_TAGS),
    "attributes": {k: set(v) for k, v in _TAG_ATTRS.items()},
    "attribute_filter": _attribute_filter,
    "strip_comments": True,
    "link_rel": "noopener noreferrer",
    "url_schemes": set(_URL_SCHEMES),
    "filter_style_properties": set(STYLE_PROPERTIES),
    "set_tag_attribute_values": {"a": {"target": "_blank"}},
}


def _build_cleaner() -> Callable[[str], str]:
    cleaner_cls = getattr(nh3, "Cleaner", None)
    if cleaner_cls is not None:
        cleaner = cleaner_cls(**_KWARGS)
        clean: Callable[[str], str] = cleaner.clean
        return clean
    return partial(nh3.clean, **_KWARGS)  # type: ignore[arg-type]  # nh3 < 0.3


_CLEAN = _build_cleaner()


def rewrite_images(html: str, replace: Callable[[str], str | None]) -> str:
    """Sanitize ``html`` again with every ``img src`` passed through ``replace`` (None drops it).

    For the renderer: it blocks remote images (dropping their ``src``) or points ``cid:``
    ones at the part they name. The output obeys the same policy as :func:`sanitize_html`
    (a URL ``replace`` returns must itself pass it); never raises (escaped text on failure).
    """

    def attribute_filter(tag: str, attr: str, value: str) -> str | None:
        kept = _attribute_filter(tag, attr, value)
        if kept is None or tag != "img" or attr != "src":
            return kept
        try:
            new = replace(kept)
        except Exception:
            return None
        return None if new is None else _attribute_filter(tag, attr, new)

    try:
        if not html:
            return ""
        return nh3.clean(html, **{**_KWARGS, "attribute_filter": attribute_filter})  # type: ignore[arg-type]
    except Exception:
        return _html.escape(html)


def sanitize_html(html: str) -> str:
    """Return ``html`` sanitized for rendering in the web UI (see the module docstring policy).

    Never raises: if the sanitizer itself fails, the input is returned fully HTML-escaped.
    """
    try:
        if not html:
            return ""
        return _CLEAN(html)
    except Exception:
        try:
            return _html.escape(html.encode("utf-8", "replace").decode("utf-8"))
        except Exception:  # pragma: no cover - defensive
            return ""
