"""Structured data in HTML mail: JSON-LD blocks and microdata, as plain schema.org items.

Senders of tickets, bookings and parcels describe them for mail clients in
two syntaxes: ``<script type="application/ld+json">`` (one object, a list, or
an ``@graph``) and microdata (``itemscope``/``itemtype``/``itemprop``).
:func:`structured_items` returns both as JSON-LD-shaped dicts —
``{"@type": "FlightReservation", "reservationFor": {...}, ...}`` — in
document order, JSON-LD first.

The input is a stranger's HTML, so nothing here may raise or run long: a
block that is not JSON is skipped, deep nesting stops at ``MAX_DEPTH``, at
most ``MAX_ITEMS`` items and ``MAX_HTML`` characters are looked at, and the
stdlib tokenizer (no tree, no network, no entity expansion beyond HTML's
own) is used because microdata needs only the open-element stack. extruct
would do this too but brings lxml, rdflib and three more parsers for
syntaxes mail does not use.
"""

from __future__ import annotations

import json
import logging
from html.parser import HTMLParser
from typing import Any

log = logging.getLogger(__name__)

MAX_HTML = 1_000_000  # characters of HTML looked at (structured data sits early)
MAX_JSON = 500_000  # characters of one JSON-LD block
MAX_ITEMS = 50  # top-level items per message
MAX_DEPTH = 24  # nested microdata items
MAX_TEXT = 2_000  # characters of one microdata text value
MAX_OPEN = 256  # open elements tracked: deeper ones are read as if they had no end tag

# Elements without an end tag (the HTML standard's void elements).
_VOID = frozenset(
    ("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta")
    + ("param", "source", "track", "wbr")
)
_URL_ATTRIBUTE = {
    "a": "href",
    "area": "href",
    "link": "href",
    "audio": "src",
    "embed": "src",
    "iframe": "src",
    "img": "src",
    "source": "src",
    "track": "src",
    "video": "src",
    "object": "data",
}


def structured_items(html: str | None) -> list[dict[str, Any]]:
    """Every top-level JSON-LD and microdata item of ``html`` (never raises)."""
    if not html:
        return []
    text = html[:MAX_HTML]
    lowered = text.lower()
    if "ld+json" not in lowered and "itemscope" not in lowered:
        return []  # most mail: nothing to tokenize
    parser = _Collector()
    try:
        parser.feed(text)
        parser.close()
    except Exception:  # the tokenizer is lenient; this guards the unforeseen
        log.debug("Structured data: the HTML could not be read to the end.", exc_info=True)
    items: list[dict[str, Any]] = []
    for block in parser.json_blocks:
        items.extend(_json_ld_items(block))
    items.extend(parser.microdata)
    return items[:MAX_ITEMS]


def _json_ld_items(block: str) -> list[dict[str, Any]]:
    """The items of one JSON-LD block: an object, a list of them, or ``@graph`` members."""
    if len(block) > MAX_JSON:
        return []
    try:
        data = json.loads(block.strip().removeprefix("<!--").removesuffix("-->"))
    except (ValueError, RecursionError):
        return []
    found: list[dict[str, Any]] = []
    pending: list[Any] = [data]
    while pending and len(found) < MAX_ITEMS:
        value = pending.pop(0)
        if isinstance(value, list):
            pending[:0] = value[:MAX_ITEMS]
        elif isinstance(value, dict):
            graph = value.get("@graph")
            if isinstance(graph, list | dict):
                pending[:0] = graph if isinstance(graph, list) else [graph]
            elif "@type" in value:
                found.append(value)
    return found


class _Element:
    """One open element and what microdata it carries."""

    __slots__ = ("tag", "item", "prop", "text", "size")

    def __init__(
        self, tag: str, item: dict[str, Any] | None, prop: list[str], text: list[str] | None
    ) -> None:
        self.tag = tag
        self.item = item  # the item this element's itemscope opened
        self.prop = prop  # its itemprop names, when its value is its text
        self.text = text
        self.size = 0  # characters in ``text``


class _Collector(HTMLParser):
    """Collects JSON-LD script bodies and microdata items while tokenizing."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.json_blocks: list[str] = []
        self.microdata: list[dict[str, Any]] = []
        self._script: list[str] | None = None
        self._script_size = 0
        self._stack: list[_Element] = []
        # The open elements whose text is a property's value: only these see text,
        # so a page of thousands of plain elements costs nothing per text run.
        self._texts: list[_Element] = []
        self._scopes: list[dict[str, Any]] = []

    # -- JSON-LD ------------------------------------------------------------

    def _json_script(self, attrs: dict[str, str]) -> bool:
        kind = attrs.get("type", "").split(";")[0].strip().lower()
        return kind == "application/ld+json"

    # -- tokens -------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Open an element: a JSON-LD script, an item, a property, or none of them."""
        values = {name.lower(): value or "" for name, value in attrs}
        if tag == "script":
            self._script = [] if self._json_script(values) else None
            self._script_size = 0
            return
        props = values.get("itemprop", "").split() if "itemprop" in values else []
        scope: dict[str, Any] | None = None
        if "itemscope" in values and len(self._scopes) < MAX_DEPTH:
            scope = {"@type": _microdata_type(values.get("itemtype", ""))}
            parent = self._scopes[-1] if self._scopes else None
            if props and parent is not None:
                for name in props:
                    _add(parent, name, scope)
            elif len(self.microdata) < MAX_ITEMS:
                self.microdata.append(scope)
            self._scopes.append(scope)
            props = []  # its value is the item, not its text
        elif props and self._scopes:
            value = _attribute_value(tag, values)
            if value is not None:
                for name in props:
                    _add(self._scopes[-1], name, value)
                props = []
        else:
            props = []
        if tag in _VOID or len(self._stack) >= MAX_OPEN:
            if scope is not None:
                self._scopes.pop()
            return
        element = _Element(tag, scope, props, [] if props else None)
        self._stack.append(element)
        if element.text is not None:
            self._texts.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """``<meta ... />``: open and close at once."""
        self.handle_starttag(tag, attrs)
        if tag not in _VOID and tag != "script":
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        """Close the element (and any left open inside it, as browsers do)."""
        if tag == "script":
            if self._script is not None:
                self.json_blocks.append("".join(self._script))
            self._script = None
            return
        if not any(element.tag == tag for element in self._stack):
            return  # a stray end tag
        while self._stack:
            element = self._stack.pop()
            self._close(element)
            if element.tag == tag:
                break

    def handle_data(self, data: str) -> None:
        """Text: a JSON-LD script's body, or the value of open text properties."""
        if self._script is not None:
            if self._script_size <= MAX_JSON:
                self._script.append(data)
                self._script_size += len(data)
            return
        for element in self._texts:
            if element.text is not None and element.size < MAX_TEXT:
                element.text.append(data)
                element.size += len(data)

    def close(self) -> None:
        """End of input: close what is still open."""
        super().close()
        while self._stack:
            self._close(self._stack.pop())

    def _close(self, element: _Element) -> None:
        if element.item is not None and self._scopes and self._scopes[-1] is element.item:
            self._scopes.pop()
        if element.text is not None and self._texts and self._texts[-1] is element:
            self._texts.pop()  # elements close in the order they opened, innermost first
        if element.text is not None and self._scopes:
            value = " ".join("".join(element.text).split())[:MAX_TEXT]
            for name in element.prop:
                _add(self._scopes[-1], name, value)


def _microdata_type(itemtype: str) -> str:
    """``https://schema.org/FlightReservation`` → ``FlightReservation`` (the first type)."""
    first = itemtype.split()[0] if itemtype.split() else ""
    return first.rstrip("/").rsplit("/", 1)[-1] or "Thing"


def _attribute_value(tag: str, values: dict[str, str]) -> str | None:
    """A property's value from an attribute (microdata §5.4), or None to read its text."""
    if "content" in values:
        return values["content"]
    if tag in _URL_ATTRIBUTE:
        return values.get(_URL_ATTRIBUTE[tag], "")
    if tag == "time" and "datetime" in values:
        return values["datetime"]
    if tag in ("data", "meter") and "value" in values:
        return values["value"]
    return None


def _add(item: dict[str, Any], name: str, value: Any) -> None:
    """Set a property; a repeated name becomes a list, as in JSON-LD."""
    if name not in item:
        item[name] = value
    elif isinstance(item[name], list):
        if len(item[name]) < MAX_ITEMS:
            item[name].append(value)
    else:
        item[name] = [item[name], value]
