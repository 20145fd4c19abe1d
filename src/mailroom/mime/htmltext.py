"""HTML to plain text, for messages without a text/plain body and for previews.

This is a fast approximation, not a renderer: source whitespace is collapsed as a browser would,
a run of block-level tags (``div``, ``br``, ``tr``, ``li``...) becomes one line break, or a blank
line when it opens or closes a paragraph, heading, quote or rule, table cells are separated by
spaces, all tags are removed by ``nh3`` (the content of ``script``,
``style``, ``title``, ``head`` and ``template`` is dropped), and entities are decoded.

Invariants: :func:`html_to_text` never raises; its output has no U+0000, no runs of spaces,
no trailing spaces on lines, and at most one blank line in a row.
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Callable
from functools import partial

import nh3

__all__ = ["html_to_text"]

# Block-level tags survive the tag stripper (without attributes) and then become line breaks.
# fmt: off
_BLOCK_TAGS = {
    "address", "article", "aside", "blockquote", "br", "caption", "center", "dd", "details",
    "div", "dl", "dt", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
    "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "td", "th", "tr", "ul",
}
# fmt: on
_CELL_RE = re.compile(r"</?t[dh]>")
_TAG_RUN_RE = re.compile(r"(?: *<[^>]*>)+ *")
_PARAGRAPH_MARKS = ("<p>", "</p>", "<h", "</h", "<br><br>", "<hr>", "<blockquote>")


def _line_break(m: re.Match[str]) -> str:
    """A run of adjacent block tags is one line break, or a blank line around paragraphs."""
    run = m.group().replace(" ", "")
    return "\n\n" if any(mark in run for mark in _PARAGRAPH_MARKS) else "\n"


_KWARGS: dict[str, object] = {
    "tags": _BLOCK_TAGS,
    "clean_content_tags": {"script", "style", "title", "head", "template"},
    "attributes": {},
    "link_rel": None,
    "strip_comments": True,
}


def _build() -> Callable[[str], str]:
    cleaner_cls = getattr(nh3, "Cleaner", None)
    if cleaner_cls is not None:
        clean: Callable[[str], str] = cleaner_cls(**_KWARGS).clean
        return clean
    return partial(nh3.clean, **_KWARGS)  # type: ignore[arg-type]  # nh3 < 0.3


_STRIP_TAGS = _build()


def html_to_text(html: str) -> str:
    """Return the readable text of an HTML document or fragment (see module docstring)."""
    try:
        if not html:
            return ""
        # nh3 escapes every "<" in text, so each "<" left in its output starts a block tag.
        out = _STRIP_TAGS(html).replace("\r", " ").replace("\n", " ").replace("\x00", "")
        out = _TAG_RUN_RE.sub(_line_break, _CELL_RE.sub(" ", out))
        text = _html.unescape(out)
        lines: list[str] = []
        blank = True  # drop leading blank lines
        for line in text.split("\n"):
            line = " ".join(line.split())
            if line:
                lines.append(line)
                blank = False
            elif not blank:
                lines.append("")
                blank = True
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)
    except Exception:
        return ""
