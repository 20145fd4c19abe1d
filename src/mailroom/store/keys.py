"""Mail-derived text used as a key: short enough for every index on both stores.

Text columns are unbounded (see ``mailroom.store.models``), but PostgreSQL
refuses a btree index entry over about 2.7 kB, and an index on SQLite or
PostgreSQL is only useful for equality on identifiers anyway. A Message-ID
or a reference longer than ``MAX_KEY_BYTES`` (1,000 bytes of UTF-8; no
conforming one comes near, since RFC 5322 lines end at 998 characters and a
msg-id cannot fold) is therefore stored as ``sha256:`` and the hex digest of
itself. Equal ids keep equal keys, so threading by them still works, and
the full header stays in the message's headers and raw bytes.
"""

from __future__ import annotations

import hashlib

MAX_KEY_BYTES = 1000
DIGEST_PREFIX = "sha256:"


def id_key(value: str) -> str:
    """``value`` itself when it fits an index, else ``sha256:<hex>`` of it (deterministic)."""
    encoded = value.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_KEY_BYTES:
        return value
    return DIGEST_PREFIX + hashlib.sha256(encoded).hexdigest()
