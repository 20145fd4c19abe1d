"""Importing local sources: autodetection, folders as labels, idempotent reruns."""

from __future__ import annotations

import mailbox
from pathlib import Path

import pytest
from sqlalchemy import func, select

from mailroom.errors import SourceError
from mailroom.providers.local import import_path, open_source
from mailroom.reading import list_messages
from mailroom.store.engine import Store
from mailroom.store.models import Label, Message
from tests.factories import make_message
from tests.helpers import write_maildir


def _count(store: Store) -> int:
    with store.session() as session:
        return int(session.scalar(select(func.count()).select_from(Message)) or 0)


def test_maildir_folders_become_labels_and_rerun_imports_nothing(
    store: Store, tmp_path: Path
) -> None:
    """Maildir++ folders map to labels (Spam to the system label) and a rerun adds nothing."""
    root = tmp_path / "mail"
    write_maildir(root, {"1": make_message("one@x"), "2": make_message("two@x")})
    write_maildir(root, {"3": make_message("three@x")}, folder=".Spam")
    write_maildir(root, {"4": make_message("four@x")}, folder=".Work.Invoices")
    first = import_path(store, root)
    assert (first.imported, first.duplicates, first.total) == (4, 0, 4)
    second = import_path(store, root)
    assert (second.imported, second.duplicates) == (0, 4)
    assert _count(store) == 4
    with store.session() as session:
        rows = {r["message_id"]: r["labels"] for r in list_messages(session, 1)}
        work = session.scalar(select(Label).where(Label.path == "Work/Invoices"))
        assert work is not None and work.parent_id is not None
    assert rows["one@x"] == ["Inbox"]
    assert rows["three@x"] == ["Spam"]
    assert rows["four@x"] == ["Work/Invoices"]


def test_same_message_in_two_folders_is_one_message_with_two_labels(
    store: Store, tmp_path: Path
) -> None:
    """Identical bytes in two folders are stored once, carrying both labels."""
    root = tmp_path / "mail"
    raw = make_message("same@x")
    write_maildir(root, {"a": raw})
    write_maildir(root, {"b": raw}, folder=".Archive")
    import_path(store, root)
    with store.session() as session:
        (row,) = list_messages(session, 1)
    assert row["labels"] == ["Archive", "Inbox"]


def test_mbox_and_eml_folder_are_detected(store: Store, tmp_path: Path) -> None:
    """An mbox file and a folder of .eml files import through the same command."""
    box_path = tmp_path / "box.mbox"
    box = mailbox.mbox(box_path)
    box.add(make_message("m1@x"))
    box.add(make_message("m2@x", headers={"Status": "RO"}))
    box.flush()
    box.close()
    eml = tmp_path / "eml" / "Receipts"
    eml.mkdir(parents=True)
    (eml / "a.eml").write_bytes(make_message("e1@x"))
    assert open_source(box_path).kind == "mbox"
    assert open_source(tmp_path / "eml").kind == "eml"
    assert import_path(store, box_path).imported == 2
    assert import_path(store, tmp_path / "eml").imported == 1
    with store.session() as session:
        rows = {r["message_id"]: r for r in list_messages(session, 1)}
    assert rows["m2@x"]["seen"] and not rows["m1@x"]["seen"]
    assert rows["e1@x"]["labels"] == ["Receipts"]


def test_unreadable_file_fails_only_itself(store: Store, tmp_path: Path) -> None:
    """A file that cannot be read is reported as failed; the rest imports."""
    root = tmp_path / "mail"
    write_maildir(root, {"ok": make_message("ok@x"), "bad": make_message("bad@x")})
    bad = root / "cur" / "bad:2,S"
    bad.unlink()
    bad.mkdir()  # reading a directory fails like an unreadable file
    summary = import_path(store, root)
    assert summary.imported == 1 and len(summary.failed) == 1


def test_missing_and_unknown_paths_say_so(tmp_path: Path) -> None:
    """A missing path and a non-mail file give a plain SourceError."""
    with pytest.raises(SourceError, match="does not exist"):
        open_source(tmp_path / "nope")
    other = tmp_path / "notes.bin"
    other.write_bytes(b"\x00\x01")
    with pytest.raises(SourceError, match="not an mbox"):
        open_source(other)


def test_maildir_flags_mark_read_and_starred(store: Store, tmp_path: Path) -> None:
    """Maildir flag F stars a message, S marks it read, new/ means unread."""
    root = write_maildir(tmp_path / "mail", {})
    (root / "cur" / "1:2,FS").write_bytes(make_message("flagged@x"))
    (root / "new" / "2").write_bytes(make_message("fresh@x"))
    import_path(store, root)
    with store.session() as session:
        rows = {r["message_id"]: r for r in list_messages(session, 1)}
    assert rows["flagged@x"]["labels"] == ["Inbox", "Starred"] and rows["flagged@x"]["seen"]
    assert rows["fresh@x"]["labels"] == ["Inbox"] and not rows["fresh@x"]["seen"]


def test_batches_end_early_at_their_byte_limit(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large messages make smaller batches, so the batches parsed ahead stay bounded."""
    import mailroom.providers.local.importer as importer

    root = tmp_path / "mail"
    big = {str(n): make_message(f"big{n}@x", body="x" * 40_000) for n in range(10)}
    write_maildir(root, big)
    monkeypatch.setattr(importer, "BATCH_BYTES", 100_000)
    stored: list[int] = []
    summary = import_path(store, root, progress=stored.append)
    assert summary.imported == 10 and _count(store) == 10
    assert stored == [3, 3, 3, 1]  # 3 x ~40 KB pass 100 KB; without the limit: [10]
