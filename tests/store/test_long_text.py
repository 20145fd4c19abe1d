"""Hostile header lengths are stored whole on both stores: no text column refuses mail."""

from __future__ import annotations

import random
import string
from pathlib import Path

from sqlalchemy import func, select

from mailroom.labels.resolver import resolve_path
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.providers.local.importer import _folder, import_path
from mailroom.store.engine import Store
from mailroom.store.keys import id_key
from mailroom.store.models import Folder, Label, Message, MessageRef, Thread

# Random letters do not compress, so PostgreSQL's ~2.7 kB btree limit is really met.
_RANDOM = random.Random(11)
# The parser drops ids over 998 characters as junk; 980 CJK characters are ~2.9 kB of UTF-8.
_CJK = "".join(chr(code) for code in range(0x4E00, 0x4E00 + 2000))


def _noise(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_RANDOM.choice(alphabet) for _ in range(n))


def _message(message_id: str, subject: str, sender: str, references: list[str]) -> bytes:
    lines = [
        f"From: {sender}",
        "To: Owner <owner@example.org>",
        f"Subject: {subject}",
        f"Message-ID: <{message_id}>",
        "Date: Tue, 01 Dec 2026 10:00:00 +0000",
        "MIME-Version: 1.0",
        "Content-Type: text/plain; charset=utf-8",
    ]
    if references:
        lines.append(f"In-Reply-To: <{references[-1]}>")
        lines.append("References: " + "\r\n ".join(f"<{ref}>" for ref in references))
    return ("\r\n".join(lines) + "\r\n\r\nHello.\r\n").encode("utf-8")


def _maildir(root: Path, messages: dict[str, tuple[str, bytes]]) -> Path:
    for name, (folder, raw) in messages.items():
        base = root / folder if folder else root
        for sub in ("cur", "new", "tmp"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        (base / "cur" / f"{name}:2,S").write_bytes(raw)
    return root


def test_hostile_header_lengths_are_imported_whole(store: Store, tmp_path: Path) -> None:
    """Every message is stored and threaded: 5,000-char Subject, 2,000-char From name and
    address, ~3 kB Message-IDs and References, a 5,000-char junk id, a 248-byte folder name."""
    subject = "Ünïcødé " + _noise(5000)
    name = _noise(2000)
    address = _noise(1990).lower() + "@example.com"
    long_id = _noise(980, _CJK) + "@example.com"
    long_refs = [_noise(980, _CJK) + "@a.example", _noise(981, _CJK) + "@b.example", long_id]
    folder = "." + "Ordner-" + "ä" * 120  # Maildir++: one name component, 248 bytes
    root = _maildir(
        tmp_path / "mail",
        {
            "1": ("", _message(long_id, subject, f'"{name}" <{address}>', [])),
            "2": (
                folder,
                _message("reply@x", "Re: " + subject, f'"{name}" <{address}>', long_refs),
            ),
            "3": ("", _message("plain@x", "Plain", "Bob <bob@example.net>", long_refs[:2])),
            "4": ("", _message(_noise(5000) + "@x", subject, "Eve <eve@example.net>", [])),
        },
    )

    summary = import_path(store, root, owner="me", account="hostile")
    again = import_path(store, root, owner="me", account="hostile")

    assert (summary.imported, summary.failed) == (4, [])
    assert (again.imported, again.duplicates, again.failed) == (0, 4, [])
    with store.session() as session:
        stored = {m.message_id_header: m for m in session.scalars(select(Message))}
        first = stored[id_key(long_id)]
        assert (first.subject, first.from_name, first.from_email) == (subject, name, address)
        reply = stored["reply@x"]
        assert reply.thread_id == first.thread_id, "the long Message-ID still threads the reply"
        thread = session.get_one(Thread, first.thread_id)
        assert thread.subject == subject
        refs = set(session.scalars(select(MessageRef.ref)))
        assert {id_key(ref) for ref in long_refs} <= refs
        assert session.scalar(select(func.count()).select_from(Label).where(
            Label.name == folder[1:]
        )) == 1  # fmt: skip


def test_long_label_and_folder_paths_are_stored(store: Store) -> None:
    """A folder path of three 600-character levels gets its labels and folder row on both stores.

    (1.8 kB: past the old widths, within the ~2.7 kB PostgreSQL indexes; see store.keys.)
    """
    parts = [_noise(600) for _ in range(3)]
    with store.session() as session:
        user = get_or_create_user(session, "me")
        account = get_or_create_account(session, user, "deep", "local")
        folder_id, label_id = _folder(session, account.id, user.id, tuple(parts))
        assert session.get_one(Folder, folder_id).path == "/".join(parts)
        assert resolve_path(session, user.id, parts).id == label_id
        assert session.get_one(Label, label_id).name == parts[-1]
