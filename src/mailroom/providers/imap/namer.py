"""One owner's IMAP provider ids: the form new mail is named in, and every form to look one up by.

A provider id made from a Message-ID (:mod:`.identity`) is clear (``mid:``/``midh:``)
for an owner whose mail is clear, and the owner's keyed hash of the Message-ID
(``midk:``) once their new mail is sealed: the id is a look-up column like
``messages.message_id_header``, so it follows the same rules.

* **Naming** (:meth:`ImapNamer.name`): keyed under the owner's newest key
  version while the store seals new mail, clear otherwise.
* **Looking up** (:meth:`ImapNamer.forms`): a stored message may carry the clear
  id (stored before sealing was switched on, or while it was off) or the keyed
  id under any stored key version (during an owner key rotation, until its last
  pass re-hashes them: ``crypto.provider_id_rotation``). Every comparison of an
  envelope with a stored id, and every look-up of stored ids, goes through all
  forms, so a moved or re-numbered message is re-located, never stored twice
  under two forms (``UNIQUE(provider_id, account_id)`` guards one form only).
* **Un-naming** (:func:`stored_message_ids`): a keyed id cannot be read back,
  and the IMAP code needs the clear Message-ID to ``SEARCH HEADER`` for the
  message on the server; it comes from the stored message's header list
  (sealed with the rest of the message), checked against the stored id.

The namer derives its hash keys once, from a session, and then needs none:
a sync names its envelopes after the session that read the keys has closed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from mailroom.crypto.keyed_hash import KeyedHash
from mailroom.crypto.sealing import mail_cipher, seals_new_mail
from mailroom.providers.imap.identity import (
    KEYED_PREFIX,
    keyed_provider_id,
    named_by_message_id,
    parse_provider_id,
    provider_id,
    size_of,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["PROVIDER_ID_KIND", "ImapNamer", "stored_message_ids"]

PROVIDER_ID_KIND = "imap-provider-id"  # the lookup hash kind of keyed provider ids


class ImapNamer:
    """How one owner's IMAP messages are named (module docstring).

    ``hashers``: the keyed hash of each stored key version, newest first (none for an
    owner without keys); ``keyed``: whether new names are keyed (under the newest).
    """

    __slots__ = ("_hashers", "_keyed")

    def __init__(self, hashers: Sequence[KeyedHash] = (), *, keyed: bool = False) -> None:
        if keyed and not hashers:
            raise ValueError("A keyed namer needs the owner's key.")
        self._hashers = tuple(hashers)
        self._keyed = keyed

    @classmethod
    def of(cls, session: Session, owner: int, *, keyed: bool | None = None) -> ImapNamer:
        """The namer of ``owner`` in this session's store.

        ``keyed`` None: keyed exactly when the store seals new mail; True: keyed in any
        case (a key rotation naming under the new version), False: clear names.
        """
        cipher = mail_cipher(session)
        if cipher is None:
            if keyed:
                raise ValueError("This store has no keys to name sealed mail with.")
            return cls()
        keyed = seals_new_mail(session) if keyed is None else keyed
        versions = set(cipher.keys.versions(owner))
        if keyed:
            versions.add(cipher.keys.current(owner).version)  # made on first use
        hashers = [
            KeyedHash(cipher.lookup_key(cipher.keys.version(owner, v), PROVIDER_ID_KIND))
            for v in sorted(versions, reverse=True)
        ]
        return cls(hashers, keyed=keyed)

    @property
    def keyed(self) -> bool:
        """Whether new names are keyed hashes (the owner's new mail is sealed)."""
        return self._keyed

    def name(self, message_id: str | None, size: int) -> str | None:
        """The provider id a new message with this Message-ID and size is stored under."""
        if not message_id:
            return None
        if self._keyed:
            return keyed_provider_id(self._hashers[0].hexdigest(message_id), size)
        return provider_id(message_id, size)

    def forms(self, message_id: str | None, size: int) -> list[str]:
        """Every provider id such a message may be stored under: the new name first."""
        if not message_id:
            return []
        keyed = [keyed_provider_id(h.hexdigest(message_id), size) for h in self._hashers]
        clear = provider_id(message_id, size)
        found = [*keyed, clear] if self._keyed else [clear, *keyed]
        return [form for form in found if form is not None]

    def matches(self, stored: str, message_id: str | None, size: int) -> bool:
        """Whether ``stored`` names the message with this Message-ID and size."""
        if not message_id:
            return False
        if stored.startswith(KEYED_PREFIX):
            return any(
                keyed_provider_id(h.hexdigest(message_id), size) == stored for h in self._hashers
            )
        return stored == provider_id(message_id, size)


def stored_message_ids(
    session: Session, owner: int, provider_ids: Mapping[int, str], namer: ImapNamer | None = None
) -> dict[int, str]:
    """The clear Message-ID of the owner's stored messages, by message id.

    ``provider_ids``: message id → its stored provider id. A ``mid:`` id says it; a
    keyed or long one is answered from the message's header list, and only when the
    id is that Message-ID's name (so a header list that disagrees names nothing).
    Messages whose id is not made from a Message-ID are left out.
    """
    from mailroom.crypto.mail_reading import header_message_ids

    found: dict[int, str] = {}
    hidden: list[int] = []
    for message_id, stored in provider_ids.items():
        clear, _size = parse_provider_id(stored)
        if clear is not None:
            found[message_id] = clear
        elif named_by_message_id(stored):
            hidden.append(message_id)
    if not hidden:
        return found
    namer = namer or ImapNamer.of(session, owner, keyed=False)
    headers = header_message_ids(session, hidden, owner)
    for message_id in hidden:
        stored = provider_ids[message_id]
        clear = headers.get(message_id)
        size = size_of(stored)
        if clear is not None and size is not None and namer.matches(stored, clear, size):
            found[message_id] = clear
    return found
