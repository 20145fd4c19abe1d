"""Undo tokens: what an action did, carried by the page that offers to undo it.

The token is the action's undo record (:mod:`mailroom.web.mailactions`) as
compressed JSON, base64url, and an HMAC-SHA256 of it keyed with the session's
CSRF token, so a token works only in the session that got it and a damaged
one is refused. The key is not secret from the page itself, which is why the
undo validates everything again (the user's own threads, messages and
labels, through the operations service): a hand-made token can do nothing
the user could not do with the buttons. Nothing is kept on the server, so
every web process can undo what any other did.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import zlib
from typing import Any

MAX_TOKEN = 64 * 1024  # characters; larger undo records are not offered
_MAX_RECORD = 1024 * 1024  # bytes of JSON a token may unpack to


def _mac(body: str, key: str) -> str:
    digest = hmac.new(key.encode(), body.encode(), hashlib.sha256).digest()[:18]
    return base64.urlsafe_b64encode(digest).decode("ascii")


def seal(record: dict[str, Any], key: str) -> str | None:
    """The token of ``record`` under ``key``; None when it would be too long to carry."""
    packed = zlib.compress(json.dumps(record, separators=(",", ":")).encode(), 9)
    body = base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")
    token = f"{body}.{_mac(body, key)}"
    return token if len(token) <= MAX_TOKEN else None


def unseal(token: str, key: str) -> dict[str, Any] | None:
    """The record a token of this session carries, or None (foreign, damaged, too big)."""
    body, _, mac = token.partition(".")
    if not body or len(token) > MAX_TOKEN or not hmac.compare_digest(mac, _mac(body, key)):
        return None
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        inflater = zlib.decompressobj()
        data = inflater.decompress(packed, _MAX_RECORD)
        if inflater.unconsumed_tail:
            return None
        record = json.loads(data)
    except (binascii.Error, zlib.error, ValueError):
        return None
    return record if isinstance(record, dict) else None
