"""mailroom.mime: raw RFC 5322 bytes in, a parsed record out, never an exception.

Modules, one concept each:
    * :mod:`~mailroom.mime.parse` - :func:`parse_message`, the entry point, and its caps;
    * :mod:`~mailroom.mime.model` - the :class:`ParsedMessage` and :class:`Attachment` records;
    * :mod:`~mailroom.mime.charsets` - :func:`decode_bytes` and the documented charset fallback
      order (declared charset, then UTF-8, then Windows-1252, then ISO-8859-1; details there);
    * :mod:`~mailroom.mime.headers` - raw 8-bit headers, unfolding, RFC 2047 encoded words;
    * :mod:`~mailroom.mime.addresses` - :class:`Address` and address-list parsing;
    * :mod:`~mailroom.mime.msgids` - :func:`normalize_message_id`, :func:`parse_id_list`;
    * :mod:`~mailroom.mime.structure` - MIME tree, IMAP part numbers, body/attachment choice;
    * :mod:`~mailroom.mime.sanitize` - :func:`sanitize_html`, the only HTML that may be shown;
    * :mod:`~mailroom.mime.htmltext` - :func:`html_to_text`;
    * :mod:`~mailroom.mime.preview` - :func:`make_preview`;
    * :mod:`~mailroom.mime.compose` - the writing side: :func:`~mailroom.mime.compose.compose`
      builds RFC 5322 bytes from headers and body parts (JMAP drafts; sending later).

Invariants: no public function here raises on any input of the declared types, and every
string it returns encodes to UTF-8 and holds no U+0000 — except ``compose``, which refuses
what the wire cannot carry with ``ComposeError`` (imported from its module, not from here).
"""

from mailroom.mime.addresses import Address, parse_address_list
from mailroom.mime.charsets import decode_bytes
from mailroom.mime.htmltext import html_to_text
from mailroom.mime.model import Attachment, ParsedMessage
from mailroom.mime.msgids import normalize_message_id, parse_id_list
from mailroom.mime.parse import parse_message
from mailroom.mime.preview import make_preview
from mailroom.mime.sanitize import sanitize_html

__all__ = [
    "Address",
    "Attachment",
    "ParsedMessage",
    "decode_bytes",
    "html_to_text",
    "make_preview",
    "normalize_message_id",
    "parse_address_list",
    "parse_id_list",
    "parse_message",
    "sanitize_html",
]
