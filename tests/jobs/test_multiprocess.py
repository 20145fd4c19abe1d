"""End to end: two supervisors and two workers on PostgreSQL + Redis + Dovecot.

Exactly one watcher per account at any time; a supervisor killed with -9 has
its accounts picked up by the other within the lease TTL; new mail arrives
exactly once.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select, text

from mailroom.config import Settings
from mailroom.secrets import generate_key
from mailroom.store.engine import Store, open_store
from mailroom.store.models import Base, Change, Message
from tests.conftest import service_missing
from tests.factories import make_message
from tests.imap.conftest import IDLE_CHECK, _start, add_account, new_mailbox
from tests.imap.views import Mailbox
from tests.support.dovecot import DovecotServer

TTL = 6.0
LINE = re.compile(
    r"^(\S+ \S+) INFO mailroom\.jobs\.supervisor: (Watching|Stopped watching) "
    r"account (\d+)\."
)


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[Store]:
    """The session's PostgreSQL database, emptied."""
    store = open_store(postgres_url, migrate=False)
    names = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with store.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names}, message_search RESTART IDENTITY CASCADE"))
    yield store
    store.dispose()


@pytest.fixture
def redis_url() -> str:
    """The test Redis URL, checked."""
    url = os.environ.get("MAILROOM_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    try:
        redis.Redis.from_url(url).ping()
    except redis.RedisError as exc:
        service_missing("Redis", str(exc))
    return url


@pytest.fixture
def dovecot_idle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DovecotServer]:
    """A private Dovecot that tells IDLE clients about new mail within a second."""
    server = _start(tmp_path_factory, "multi-dovecot", IDLE_CHECK)
    try:
        yield server
    finally:
        server.cleanup()


def _wait(what: str, condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _watch_log(path: Path) -> list[tuple[datetime, bool, int]]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        if match := LINE.match(line):
            stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
            events.append((stamp, match.group(2) == "Watching", int(match.group(3))))
    return events


def _watching(path: Path) -> set[int]:
    current: set[int] = set()
    for _stamp, start, account in _watch_log(path):
        (current.add if start else current.discard)(account)
    return current


def _overlaps(logs: list[Path]) -> list[str]:
    """Moments at which two processes watched the same account."""
    timeline = sorted(
        (stamp, start, account, index)
        for index, path in enumerate(logs)
        for stamp, start, account in _watch_log(path)
    )
    holders: dict[int, set[int]] = {}
    problems = []
    for stamp, start, account, index in timeline:
        owners = holders.setdefault(account, set())
        if start:
            owners.add(index)
            if len(owners) > 1:
                problems.append(f"{stamp}: account {account} watched by {sorted(owners)}")
        else:
            owners.discard(index)
    return problems


def test_two_supervisors_two_workers_exactly_once(
    pg_store: Store,
    postgres_url: str,
    redis_url: str,
    dovecot_idle: DovecotServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One watcher per account; kill -9 hands accounts over within the TTL; mail once."""
    key = generate_key()
    monkeypatch.setenv("MAILROOM_MASTER_KEY", key)
    settings = Settings(master_key=key, allowed_private_hosts="127.0.0.1", data_dir=tmp_path)
    mailboxes: list[Mailbox] = []
    accounts: list[int] = []
    for index in range(3):
        mailbox = new_mailbox(dovecot_idle)
        for n in range(2):
            mailbox.append("INBOX", make_message(f"old{index}-{n}@e2e", subject=f"Old {n}"))
        mailboxes.append(mailbox)
        accounts.append(add_account(pg_store, settings, mailbox, name=f"acct{index}"))
    namespace = f"t{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "MAILROOM_DATABASE_URL": postgres_url,
        "MAILROOM_REDIS_URL": redis_url,
        "MAILROOM_NAMESPACE": namespace,
        "MAILROOM_WATCH_LEASE_TTL": str(TTL),
        "MAILROOM_MASTER_KEY": key,
        "MAILROOM_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
        "MAILROOM_DATA_DIR": str(tmp_path),
    }
    processes: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []

    def launch(*args: str) -> subprocess.Popen[bytes]:
        log = tmp_path / f"p{len(logs)}.log"
        logs.append(log)
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "mailroom", "-v", *args],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        processes.append(process)
        return process

    try:
        supervisors = [launch("supervisor", "--poll-interval", "2") for _ in range(2)]
        workers = [launch("worker", "--queues", "all") for _ in range(2)]

        def imported() -> bool:
            with pg_store.session() as session:
                return session.scalar(select(func.count()).select_from(Message)) == 6

        _wait("the first import", imported)
        _wait(
            "every account watched",
            lambda: _watching(logs[0]) | _watching(logs[1]) == set(accounts),
        )
        assert _watching(logs[0]).isdisjoint(_watching(logs[1]))
        leases = redis.Redis.from_url(redis_url)
        assert all(leases.exists(f"{namespace}:lease:watch:{a}") for a in accounts)

        victim = 0 if len(_watching(logs[0])) >= len(_watching(logs[1])) else 1
        taken = _watching(logs[victim])
        survivor = 1 - victim
        supervisors[victim].send_signal(signal.SIGKILL)
        supervisors[victim].wait()
        killed_at = time.monotonic()
        _wait(
            "the survivor taking over",
            lambda: _watching(logs[survivor]) == set(accounts),
            timeout=TTL * 4,
        )
        assert time.monotonic() - killed_at <= TTL * 3
        assert taken  # the killed one really held accounts

        mailboxes[0].append("INBOX", make_message("fresh@e2e", subject="Fresh"))

        def fresh_arrived() -> bool:
            with pg_store.session() as session:
                return (
                    session.scalar(
                        select(func.count()).where(Message.message_id_header == "fresh@e2e")
                    )
                    == 1
                )

        _wait("the new mail", fresh_arrived, timeout=30)
        time.sleep(4)  # let polls and the watcher overlap on it
        with pg_store.session() as session:
            ids = session.scalars(
                select(Message.id).where(Message.message_id_header == "fresh@e2e")
            ).all()
            created = session.scalar(
                select(func.count())
                .select_from(Change)
                .where(Change.type == "Email", Change.kind == "created", Change.object_id.in_(ids))
            )
        assert len(ids) == 1 and created == 1
        dead = logs[victim]  # a killed process never logs its stops: drop it from the check
        assert _overlaps([log for log in logs if log != dead]) == []

        for process in [supervisors[survivor], *workers]:
            process.send_signal(signal.SIGTERM)
        for process in [supervisors[survivor], *workers]:
            assert process.wait(timeout=60) == 0
        assert not any(leases.exists(f"{namespace}:lease:watch:{a}") for a in accounts)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
