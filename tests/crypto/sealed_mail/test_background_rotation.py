"""An owner key rotation re-encrypts sealed mail in the engine's background job, on both stores.

Driven through the real queues of :class:`~mailroom.jobs.runtime.Runtime` (huey on the
SQLite queue file in the data dir): jobs are run one by one from the queue, or by the
engine's own consumer thread; the periodic duty re-queues a rotation whose job was lost.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from mailroom.cli.main import cli
from mailroom.config import Settings
from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.mail_reading import bodies_of, raw_message
from mailroom.crypto.owner_rotation import start_rotation
from mailroom.crypto.sealing import MailSealing
from mailroom.jobs.key_rotation import QUEUE, STALE_AFTER
from mailroom.jobs.runtime import Runtime
from mailroom.rules.engine import condition_clauses
from mailroom.rules.model import Conditions
from mailroom.store.engine import Store
from mailroom.store.models import KeyRotation, Message
from tests.crypto.sealed_mail.conftest import BODY_PHRASE, key_versions, sealed_message
from tests.helpers import drain, ingest, make_account

WORDS = ("albatross", "bandicoot", "cormorant", "dromedary", "echidna")


def _mail(store: Store, owner: str) -> tuple[int, list[int]]:
    """An owner with one sealed message per word of :data:`WORDS`; (owner id, message ids)."""
    account = make_account(store, owner, name=f"{owner}-account")
    raws = [
        (str(n), sealed_message(f"{owner}{n}@example.org", f"{BODY_PHRASE} {word}"))
        for n, word in enumerate(WORDS)
    ]
    return account[0], ingest(store, account, raws).created_ids


def _all_read_and_found(store: Store, owner: int, ids: list[int]) -> bool:
    """Every message opens (body and raw bytes) and a search for its own word finds it alone."""
    with store.session() as session:
        bodies = bodies_of(session, ids)
        for message_id, word in zip(sorted(ids), WORDS, strict=True):
            raw = raw_message(session, message_id)
            if word not in bodies[message_id].text_body or raw is None or word.encode() not in raw:
                return False
            clauses = condition_clauses(session, Conditions(text=word), owner)
            found = session.scalars(
                select(Message.id).where(Message.user_id == owner, *clauses)
            ).all()
            if list(found) != [message_id]:
                return False
    return True


def _start(store: Store, owner: int) -> int:
    assert store.sealing is not None
    with store.session() as session:
        return start_rotation(session, OwnerKeys(session, store.sealing.wrapper), owner).id


def _state(store: Store, rotation_id: int) -> str:
    with store.session() as session:
        rotation = session.get(KeyRotation, rotation_id)
        assert rotation is not None
        return rotation.state


def _keykey_versions(store: Store, owner: int) -> list[int]:
    assert store.sealing is not None
    with store.session() as session:
        return OwnerKeys(session, store.sealing.wrapper).versions(owner)


@pytest.fixture
def runtime(sealed_store: Store, tmp_path: Path) -> Iterator[Runtime]:
    """The engine's queues, tasks and duties over the sealed store (no consumer started)."""
    engine = Runtime(sealed_store, Settings(data_dir=tmp_path / "data"))
    yield engine
    engine.stop()


def test_the_job_reencrypts_in_batches_until_the_old_version_is_deleted(
    sealed_store: Store, runtime: Runtime
) -> None:
    alice, ids = _mail(sealed_store, "alice")
    bob, bob_ids = _mail(sealed_store, "bob")
    rotation_id = _start(sealed_store, alice)
    assert runtime.key_rotations.request(rotation_id, batch=2)
    assert not runtime.key_rotations.request(rotation_id, batch=2)  # queued once: coalesced
    queue = runtime.queues[QUEUE]
    assert queue.pending_count() == 1
    ran = drain(queue)  # each job runs one batch and queues the next
    assert ran > 3
    assert _state(sealed_store, rotation_id) == "done"
    assert key_versions(sealed_store, alice) == {2}
    assert _keykey_versions(sealed_store, alice) == [2]  # the old version is deleted
    assert _all_read_and_found(sealed_store, alice, ids)
    assert key_versions(sealed_store, bob) == {1}  # another owner is untouched
    assert _all_read_and_found(sealed_store, bob, bob_ids)
    assert runtime.key_rotations.sweep() == []  # nothing running: nothing queued


def test_a_rotation_whose_job_was_dropped_is_requeued_by_the_duty_and_finishes(
    sealed_store: Store, runtime: Runtime
) -> None:
    alice, ids = _mail(sealed_store, "alice")
    rotation_id = _start(sealed_store, alice)
    runtime.key_rotations.request(rotation_id, batch=2)
    queue = runtime.queues[QUEUE]
    task = queue.dequeue()
    assert task is not None
    queue.execute(task)  # one batch, then the worker is killed and its queue emptied
    queue.flush()
    assert queue.pending_count() == 0
    assert key_versions(sealed_store, alice) == {1, 2}  # half-way: both versions stored ...
    assert _all_read_and_found(sealed_store, alice, ids)  # ... and both open
    runtime.duties.tick(0.0)  # every duty is due at the first tick
    assert queue.pending_count() == 1
    assert drain(queue) > 1
    assert _state(sealed_store, rotation_id) == "done"
    assert key_versions(sealed_store, alice) == {2} and _keykey_versions(sealed_store, alice) == [2]
    assert _all_read_and_found(sealed_store, alice, ids)


def test_a_lost_job_whose_marker_stayed_is_requeued_once_the_marker_is_stale(
    sealed_store: Store, runtime: Runtime
) -> None:
    alice, _ = _mail(sealed_store, "alice")
    rotation_id = _start(sealed_store, alice)
    clock = [datetime(2026, 1, 1, 12, 0)]
    jobs = runtime.key_rotations
    jobs.now = lambda: clock[0]
    queue = runtime.queues[QUEUE]
    assert jobs.request(rotation_id)
    assert queue.dequeue() is not None  # the job is lost; its marker stays
    assert jobs.sweep() == []  # queued a moment ago, as far as the marker says
    clock[0] += STALE_AFTER + timedelta(seconds=1)
    assert jobs.sweep() == [rotation_id]
    drain(queue)
    assert _state(sealed_store, rotation_id) == "done"


def test_a_job_without_the_key_waits_and_changes_nothing(
    sealed_store: Store, sealing: MailSealing, runtime: Runtime
) -> None:
    alice, _ = _mail(sealed_store, "alice")
    rotation_id = _start(sealed_store, alice)
    sealed_store.sealing = None
    assert runtime.key_rotations.run(rotation_id) is False
    assert runtime.queues[QUEUE].pending_count() == 0  # the duty asks again later
    sealed_store.sealing = sealing
    assert key_versions(sealed_store, alice) == {1}
    assert _state(sealed_store, rotation_id) == "running"


def _for_the_cli(
    store: Store, tmp_path: Path, redis_url: str = ""
) -> tuple[int, list[int], dict[str, str], str]:
    """``store`` sealing under a fresh master key, alice's sealed mail, and what a CLI run over
    it needs: (alice, her message ids, the environment with that key, the store's URL)."""
    key = os.urandom(32)
    store.sealing = MailSealing(MasterKeyWrapper(key), seal_new_mail=True)
    alice, ids = _mail(store, "alice")
    env = {
        "MAILROOM_DATA_DIR": str(tmp_path / "data"),
        "MAILROOM_MASTER_KEY": base64.urlsafe_b64encode(key).decode(),
        "MAILROOM_REDIS_URL": redis_url,
    }
    return alice, ids, env, store.engine.url.render_as_string(hide_password=False)


def test_rotate_owner_queues_the_rotation_the_running_engine_finishes(
    store: Store, tmp_path: Path
) -> None:
    """The command returns at once; the engine's consumer re-encrypts; status shows both ends."""
    alice, ids, env, url = _for_the_cli(store, tmp_path)
    data = tmp_path / "data"

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--database-url", url, "keys", *args], env=env)
        assert "Traceback" not in result.output and result.exit_code == 0, result.output
        return result.output

    said = run("rotate-owner", "alice", "--batch", "3")
    assert "queued" in said and "mailroom keys status" in said
    status = run("status")
    assert "Rotation 1 of alice (v1 -> v2): running" in status and "pass 1" in status
    assert key_versions(store, alice) == {1}  # nothing re-encrypted by the command itself

    engine = Runtime(store, Settings(data_dir=data))
    engine.start_consumers((QUEUE,))
    try:
        started = time.monotonic()
        while _state(store, 1) != "done":
            assert time.monotonic() - started < 60, "the engine did not finish the rotation"
            time.sleep(0.05)
    finally:
        engine.stop()
    assert key_versions(store, alice) == {2} and _keykey_versions(store, alice) == [2]
    assert _all_read_and_found(store, alice, ids)
    assert "No owner key rotation is running." in run("status")
    assert "Rotation 1 of alice (v1 -> v2): done at" in run("status", "--all")


def _worker(url: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """``mailroom worker --queues enrich_backlog`` in its own process."""
    return subprocess.Popen(
        [sys.executable, "-m", "mailroom", "--database-url", url, "worker", "--queues", QUEUE],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _progress(store: Store, rotation_id: int) -> dict[str, object]:
    with store.session() as session:
        rotation = session.get(KeyRotation, rotation_id)
        assert rotation is not None
        return dict(rotation.progress)


def _wait_for(what: str, condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_worker_killed_mid_rotation_is_continued_after_a_restart(
    store: Store, tmp_path: Path
) -> None:
    """kill -9 of the worker between batches, its queue lost: the duty queues the rotation
    again and a new worker finishes it; the mail opens and is found throughout."""
    alice, ids, env, url = _for_the_cli(store, tmp_path)
    data = tmp_path / "data"
    said = CliRunner().invoke(
        cli, ["--database-url", url, "keys", "rotate-owner", "alice", "--batch", "1"], env=env
    )
    assert said.exit_code == 0, said.output

    worker = _worker(url, env)
    try:
        _wait_for("a first batch", lambda: bool(_progress(store, 1)))
    finally:
        worker.kill()  # -9: no graceful end; a batch in hand is rolled back
        worker.wait(timeout=60)
    assert _state(store, 1) == "running"
    assert _all_read_and_found(store, alice, ids)  # half-way: both versions open
    engine = Runtime(store, Settings(data_dir=data))
    try:
        engine.queues[QUEUE].flush()  # whatever the killed worker left queued is lost too
        engine.duties.tick(0.0)  # the supervisor's duties: every one is due at the first tick
        assert engine.queues[QUEUE].pending_count() == 1
    finally:
        engine.stop()

    worker = _worker(url, env)
    try:
        _wait_for("the rotation to finish", lambda: _state(store, 1) == "done")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    assert key_versions(store, alice) == {2} and _keykey_versions(store, alice) == [2]
    assert _all_read_and_found(store, alice, ids)


def test_rotate_owner_with_an_unreachable_queue_starts_and_says_so(
    store: Store, tmp_path: Path
) -> None:
    """The rotation is started all the same (the duty queues it); one plain sentence."""
    alice, _, env, url = _for_the_cli(store, tmp_path, "redis://127.0.0.1:1/0")  # nobody there
    said = CliRunner().invoke(
        cli, ["--database-url", url, "keys", "rotate-owner", "alice"], env=env
    )
    assert said.exit_code == 0 and "Traceback" not in said.output, said.output
    assert "Rotation 1 could not be queued (" in said.output
    assert "mailroom keys resume" in said.output
    assert _state(store, 1) == "running" and _keykey_versions(store, alice) == [1, 2]
