"""An import killed at any point loses and doubles nothing after a rerun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from mailroom.config import Settings
from mailroom.crypto.sealing import sealing_from_settings
from mailroom.secrets import write_key_file
from mailroom.store.engine import Store
from mailroom.store.models import Change, Message
from tests.factories import make_message
from tests.helpers import write_maildir

TOTAL = 1500


def _count(store: Store) -> int:
    with store.session() as session:
        return int(session.scalar(select(func.count()).select_from(Message)) or 0)


@pytest.mark.parametrize("sealed", [False, True], ids=["clear", "sealed"])
def test_kill_during_import_then_rerun(store: Store, tmp_path: Path, sealed: bool) -> None:
    """kill -9 half-way, rerun: every message exactly once, one "created" change each.

    Sealed too (MAILROOM_ENCRYPT_MAIL=1: parse workers make the blind index entries, a
    sealing lane seals each batch's values): no row is left half-written, every message
    opens.
    """
    root = write_maildir(
        tmp_path / "mail",
        {
            f"{i:05d}": make_message(
                f"k{i}@x", subject=f"Message {i}", in_reply_to=f"k{i - 1}@x" if i % 3 else None
            )
            for i in range(TOTAL)
        },
    )
    url = store.engine.url.render_as_string(hide_password=False)
    data = tmp_path / "data"
    env = {**os.environ, "MAILROOM_DATABASE_URL": url, "MAILROOM_DATA_DIR": str(data)}
    key = tmp_path / "master.key"
    if sealed:
        write_key_file(key, data)
        env |= {"MAILROOM_MASTER_KEY_FILE": str(key), "MAILROOM_ENCRYPT_MAIL": "1"}
    command = [sys.executable, "-m", "mailroom", "import", str(root)]
    worker = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while _count(store) < 200 and time.monotonic() < deadline and worker.poll() is None:
        time.sleep(0.02)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    partial = _count(store)
    assert 0 < partial < TOTAL, "the import should have been killed half-way"
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{TOTAL - partial} imported, {partial} already stored" in rerun.stdout
    with store.session() as session:
        distinct = session.scalar(select(func.count(func.distinct(Message.message_id_header))))
        created = session.scalar(
            select(func.count())
            .select_from(Change)
            .where(Change.type == "Email", Change.kind == "created")
        )
    assert _count(store) == distinct == created == TOTAL
    if sealed:
        settings = Settings(data_dir=data, master_key_file=key, encrypt_mail=1)
        store.sealing = sealing_from_settings(settings)
        with store.session() as session:
            messages = session.scalars(select(Message)).all()
            assert all(message.sealed for message in messages)
            assert {m.subject for m in messages} == {f"Message {i}" for i in range(TOTAL)}
