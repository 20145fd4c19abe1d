"""Whether a store seals mail, and the cipher a unit of work seals and opens it with.

A :class:`MailSealing` rides on the :class:`~mailroom.store.engine.Store`
(``store.sealing``), set by whoever opened the store with the installation's
settings (:func:`sealing_from_settings`); every session of that store carries
it in ``session.info``, so code that holds only a session asks
:func:`mail_cipher` and :func:`seals_new_mail` instead of threading settings
through every call.

* ``seal_new_mail`` (``MAILROOM_ENCRYPT_MAIL=1``): new mail is written sealed
  under its owner's data key.
* The cipher is there whenever a key wrapper is configured, sealing on or off:
  mail sealed while it was on must still open after it was switched off.
  Rows say themselves whether they are sealed (``message_bodies.sealed``,
  ``blobs.user_id``), so a store may hold both.

The :class:`~mailroom.crypto.fields.FieldCipher` is made once per session: it
unwraps each owner's data key once per unit of work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.fields import FieldCipher
from mailroom.crypto.wrapping import KeyWrapper
from mailroom.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.config import Settings

from mailroom.store.engine import SEALING_INFO_KEY as _SEALING

_CIPHER = "mailroom.cipher"


@dataclass(frozen=True, slots=True)
class MailSealing:
    """A store's sealing: the key wrapper for owners' data keys and whether new mail is sealed."""

    wrapper: KeyWrapper
    seal_new_mail: bool = False


def sealing_from_settings(settings: Settings) -> MailSealing | None:
    """The installation's sealing, or None when no key wrapper is configured.

    With ``MAILROOM_ENCRYPT_MAIL=1`` a missing or unusable key is a ConfigError in one
    sentence; without it, mail simply stays clear.
    """
    from mailroom.crypto.choice import wrapper_from_settings

    try:
        wrapper = wrapper_from_settings(settings)
    except ConfigError as exc:
        if settings.encrypt_mail:
            reason = str(exc).rstrip(".")
            raise ConfigError(
                f"MAILROOM_ENCRYPT_MAIL=1 cannot seal mail without its key ({reason})."
            ) from None
        return None
    return MailSealing(wrapper, seal_new_mail=bool(settings.encrypt_mail))


def sealing_of(session: Session) -> MailSealing | None:
    """The sealing of the store ``session`` belongs to (None: a store opened without keys)."""
    found = session.info.get(_SEALING)
    return found if isinstance(found, MailSealing) else None


def seals_new_mail(session: Session) -> bool:
    """True when mail written in this session is to be sealed."""
    sealing = sealing_of(session)
    return sealing is not None and sealing.seal_new_mail


def mail_cipher(session: Session) -> FieldCipher | None:
    """This session's field cipher (made on first use), or None when the store has no keys."""
    cipher = session.info.get(_CIPHER)
    if isinstance(cipher, FieldCipher):
        return cipher
    sealing = sealing_of(session)
    if sealing is None:
        return None
    cipher = session.info[_CIPHER] = FieldCipher(OwnerKeys(session, sealing.wrapper))
    return cipher


def sealing_cipher(session: Session) -> FieldCipher | None:
    """The cipher to seal mail written in this session with, or None when it stays clear."""
    return mail_cipher(session) if seals_new_mail(session) else None


def require_cipher(session: Session, what: str) -> FieldCipher:
    """:func:`mail_cipher`, or a ConfigError saying ``what`` needs the key that is missing."""
    cipher = mail_cipher(session)
    if cipher is None:
        raise ConfigError(
            f"{what} is sealed, and no key to open it is configured; set MAILROOM_MASTER_KEY_FILE "
            "(or MAILROOM_KEY_WRAPPER) as when it was written."
        )
    return cipher
