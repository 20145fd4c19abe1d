"""Which Message-IDs a message names for threading (In-Reply-To and References).

The parser (``mime.msgids``) keeps everything that may be an id; threading is
stricter, because one junk id shared by unrelated messages glues their
conversations together for good:

- A header value without any ``<`` is ignored. In real mail such values are
  attributions — ``joe@example.com's message of "Tue, 27 Aug 2002 ..."``
  (Gnus, Emacs) — not ids; taking the bare address as an id joins every
  reply to Joe into one thread. notmuch ignores them too.
- An id equal to an address in the message's own From, To, Cc, Bcc,
  Reply-To or Sender is an address, not a Message-ID (MH writes
  ``In-Reply-To: Message from "Joe" <joe@example.com> of ...``; some
  clients put ``<joe@example.com>`` into References). notmuch takes these
  as ids and merges unrelated conversations through them; we do not.
- The message's own Message-ID is never a reference.

The cap: at most ``MAX_REFERENCES`` (50) ids per message are kept —
In-Reply-To first, then the References newest first, and the oldest
References entry (the root of the conversation) always keeps a place.
Every message of a deep conversation names its recent ancestors, which are
linked to older ones in turn, so the cap never splits a conversation whose
messages are stored; it bounds the work a hostile header can cause. In the
SpamAssassin corpus no message names more than 50 ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mailroom.mime import ParsedMessage
from mailroom.mime.msgids import normalize_message_id, parse_id_list
from mailroom.store.keys import id_key

MAX_REFERENCES = 50
_ID_FIELDS = ("message-id", "in-reply-to", "references")


def _ids(parsed: ParsedMessage, header: str, ids: list[str]) -> list[str]:
    """The parsed ids of ``header``, or none when no value of it has an angle bracket."""
    if not ids or not any("<" in value for value in parsed.header_all(header)):
        return []
    return ids


def reference_chain(parsed: ParsedMessage) -> list[str]:
    """The ids this message names for threading, most useful first, capped (see module doc)."""
    addresses = {
        address.email.lower()
        for address in [
            *parsed.from_,
            *parsed.to,
            *parsed.cc,
            *parsed.bcc,
            *parsed.reply_to,
            *([parsed.sender] if parsed.sender else []),
        ]
    }
    in_reply_to = _ids(parsed, "in-reply-to", parsed.in_reply_to)
    references = _ids(parsed, "references", parsed.references)
    # Ids are compared and stored as their index keys, as messages.message_id_header is.
    own = id_key(parsed.message_id) if parsed.message_id else None
    chain: list[str] = []
    for ref in [*in_reply_to, *reversed(references)]:
        ref = id_key(ref)
        if not ref or ref == own or ref in chain or ref.lower() in addresses:
            continue
        chain.append(ref)
    if len(chain) > MAX_REFERENCES:
        root = next((id_key(r) for r in references if id_key(r) in chain), None)
        capped = chain[:MAX_REFERENCES]
        if root is not None and root not in capped:
            capped[-1] = root
        chain = capped
    return chain


def ids_in_headers(headers: Iterable[Sequence[str]]) -> set[str]:
    """Every id a stored header list's Message-ID, In-Reply-To and References hold, as keys.

    A superset of the message's own id and its :func:`reference_chain`: for telling
    which clear id a stored keyed hash stands for (sealed mail, ``crypto.message_fields``).
    """
    found: set[str] = set()
    for entry in headers:
        if len(entry) != 2:
            continue
        name, value = str(entry[0]).lower(), str(entry[1] or "")
        if name not in _ID_FIELDS:
            continue
        ids = parse_id_list(value)
        if name == "message-id":
            own = normalize_message_id(value)
            ids = [*ids, *([own] if own else [])]
        found.update(id_key(found_id) for found_id in ids if found_id)
    return found
