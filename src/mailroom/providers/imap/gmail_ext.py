"""Gmail over IMAP: what changes when the server speaks Gmail's extensions (``X-GM-EXT-1``).

Gmail keeps each message once, with labels, and shows every label as a folder;
a plain IMAP sync would store a message once per label folder and take the
label folders for places. When the server advertises ``X-GM-EXT-1`` (checked
once, :func:`speaks_gmail`), the IMAP provider instead:

* **identity** — ``X-GM-MSGID`` (a 64-bit number, the Gmail API id in hex) is the
  provider id: ``gm:<hex>`` (:func:`gmail_provider_id`). It survives moves
  between Inbox, labels, Spam and Trash, whatever the Message-ID;
* **threads** — ``X-GM-THRID`` in hex is the provider thread id (stage 1 of
  threading, like the Gmail API's ``threadId``);
* **folders** — only ``[Gmail]/All Mail`` (``\\All``), Spam (``\\Junk``) and Trash
  (``\\Trash``) are synced (:func:`synced`). Every other folder (INBOX, Sent Mail,
  Drafts, label folders, Starred, Important) is a *view* of All Mail: it is
  discovered — so labels and their bindings exist, nested names split into parent
  chains — but never synced, so no message is stored or located twice;
* **labels** — ``X-GM-LABELS`` is fetched with the envelope and the flag scan and
  decides the message's labels (:mod:`.gmail_labels`);
* **watching** — IDLE watches All Mail, where new mail is synced from
  (:func:`watched_folder`);
* **propagation** — label changes go back as ``UID STORE ±X-GM-LABELS`` on the
  All Mail copy, trash/spam as moves (:mod:`.gmail_propagate`).

The choice is recorded per folder (``Folder.state["gmail"]``) at discovery, so
code that runs without a connection (import state, propagation layout) agrees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imapclient import imap_utf7  # type: ignore[import-untyped]
from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.store.models import Folder

if TYPE_CHECKING:
    from mailroom.providers.imap.connection import ImapConnection

__all__ = [
    "GMAIL_EXTENSION",
    "GMAIL_ITEMS",
    "LABELS_ITEM",
    "GmailFacts",
    "facts_of",
    "gmail_provider_id",
    "gmail_thread_id",
    "labels_of",
    "msgid_of",
    "search_msgid",
    "speaks_gmail",
    "synced",
    "watched_folder",
]

GMAIL_EXTENSION = "X-GM-EXT-1"
LABELS_ITEM = "X-GM-LABELS"
GMAIL_ITEMS = ("X-GM-MSGID", "X-GM-THRID", LABELS_ITEM)
PROVIDER_PREFIX = "gm:"
STATE_KEY = "gmail"
# The folders a Gmail account is synced from; every other folder is a view.
SYNCED_SPECIAL_USE = frozenset({"\\all", "\\junk", "\\trash"})
ALL_MAIL = "\\all"


def speaks_gmail(conn: ImapConnection) -> bool:
    """Whether the server offers Gmail's extensions."""
    return conn.has(GMAIL_EXTENSION)


@dataclass(frozen=True, slots=True)
class GmailFacts:
    """What Gmail says of a message besides the plain IMAP items."""

    msgid: int
    thrid: int | None
    labels: tuple[str, ...]

    @property
    def provider_id(self) -> str:
        """The message's provider id (``gm:<X-GM-MSGID in hex>``)."""
        return gmail_provider_id(self.msgid)

    @property
    def thread_id(self) -> str | None:
        """The provider thread id (X-GM-THRID in hex, like the Gmail API's threadId)."""
        return gmail_thread_id(self.thrid) if self.thrid else None


def gmail_provider_id(msgid: int) -> str:
    """The provider id of the message with this X-GM-MSGID."""
    return f"{PROVIDER_PREFIX}{msgid:x}"


def msgid_of(provider_id: str) -> int | None:
    """The X-GM-MSGID of a Gmail provider id; None for other kinds."""
    if not provider_id.startswith(PROVIDER_PREFIX):
        return None
    try:
        return int(provider_id[len(PROVIDER_PREFIX) :], 16)
    except ValueError:
        return None


def gmail_thread_id(thrid: int) -> str:
    """The provider thread id of an X-GM-THRID."""
    return f"{thrid:x}"


def _label_text(value: Any) -> str:
    raw = value if isinstance(value, bytes) else str(value).encode()
    if raw.startswith(b"\\"):
        return raw.decode("ascii", "replace")
    return str(imap_utf7.decode(raw))


def labels_of(data: dict[bytes, Any]) -> tuple[str, ...] | None:
    """The X-GM-LABELS of a FETCH answer (system labels keep their backslash), if sent."""
    value = data.get(LABELS_ITEM.encode())
    if value is None:
        return None
    items = value if isinstance(value, tuple | list) else (value,)
    return tuple(_label_text(item) for item in items if item is not None)


def facts_of(data: dict[bytes, Any]) -> GmailFacts | None:
    """The Gmail facts of a FETCH answer; None when the server sent no X-GM-MSGID."""
    msgid = data.get(b"X-GM-MSGID")
    if msgid is None:
        return None
    thrid = data.get(b"X-GM-THRID")
    return GmailFacts(
        msgid=int(msgid),
        thrid=int(thrid) if thrid is not None else None,
        labels=labels_of(data) or (),
    )


def synced(folder: Folder) -> bool | None:
    """Whether a folder of a Gmail account is synced; None when it is not a Gmail folder."""
    state = folder.state or {}
    if not state.get(STATE_KEY):
        return None
    return (folder.special_use or "").lower() in SYNCED_SPECIAL_USE


def is_all_mail(special_use: str | None) -> bool:
    """Whether a folder's special use makes it Gmail's All Mail."""
    return (special_use or "").lower() == ALL_MAIL


def search_msgid(conn: ImapConnection, msgid: int, spec: str = "1:*") -> list[int]:
    """UIDs of the selected folder (within ``spec``) holding the message with this X-GM-MSGID."""
    with conn.guard("searching"):
        found = conn.client.search(["UID", spec, "X-GM-MSGID", msgid])
    return sorted(int(u) for u in found)


def watched_folder(session: Session, account_id: int) -> tuple[int, str] | None:
    """(id, path) of a Gmail account's All Mail, which the IDLE watcher watches; else None."""
    for folder in session.scalars(select(Folder).where(Folder.account_id == account_id)):
        if synced(folder) and is_all_mail(folder.special_use):
            return folder.id, folder.path
    return None
