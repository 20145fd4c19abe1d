"""PostgreSQL at volume: a 1,000,000-message store, and the figures measured on it.

    python bench/pg_volume.py build   [--messages 1000000] [--users 10] [--drop]
    python bench/pg_volume.py measure [--rounds 200] [--runs 3]
    python bench/pg_volume.py explain
    python bench/pg_volume.py import-rate [--messages 20000] [--workers 2]
    python bench/pg_volume.py prune   [--keep-days 1]
    python bench/pg_volume.py size

The store lives in its own PostgreSQL database (default ``mailroom_volume`` on
127.0.0.1:5432, created when missing; ``--drop`` drops it first, nothing else
does). ``build`` fills it from the shipped sample corpus (``samples/demo-maildir``,
451 files) through the real import path (``providers.local.import_path``: the
parse pool, ``store_batch``, threads, tabs, search rows, change rows): ``--users``
users (``vol01``...) of ``--messages / --users`` messages each. Copy ``c`` of the
corpus for user ``u`` has every id in Message-ID/References/In-Reply-To suffixed
with ``.v<u>c<c>`` (threads stay whole inside a copy), its Date header moved and a
``Received`` header on top with the moved time, so the copies spread over ten years
(2016-2026) in corpus order.

Resumable: the build works in blocks of 20 copies (9,020 messages) per user and
records each finished block in ``bench_volume_blocks`` (a table of this script's,
in the bench database only). A killed build redoes at most the block it was in;
the import is idempotent, so that block is neither lost nor doubled. A build that
finds every block done does nothing.
"""

from __future__ import annotations

import argparse
import email.utils
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import delivery_epoch, header_block, rewrite_message_ids  # noqa: E402
from jmap_query import (  # noqa: E402  (bench/jmap_query.py)
    NEWEST_FIRST,
    PROPERTIES,
    free_port,  # noqa: E402
)
from jmap_query import request as jmap_request  # noqa: E402

SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
DATABASE = "mailroom_volume"
CORPUS = ROOT / "samples" / "demo-maildir"
BLOCK_COPIES = 20
SPREAD_START = int(datetime(2016, 1, 1, tzinfo=UTC).timestamp())
SPREAD_SECONDS = 10 * 365 * 86400
ACCOUNT = "volume"
_DATE_HEADER = re.compile(rb"^date[ \t]*:[^\n]*(?:\n[ \t][^\n]*)*\n", re.IGNORECASE | re.MULTILINE)


def user_name(index: int) -> str:
    """The name of the ``index``-th bench user (0-based): vol01, vol02, ..."""
    return f"vol{index + 1:02d}"


def database_url(name: str = DATABASE) -> str:
    return f"{SERVER}/{name}"


# ------------------------------------------------------------------- the corpus


@dataclass(frozen=True, slots=True)
class Template:
    """One corpus file: its folder, flags, bytes and delivery time."""

    folder: tuple[str, ...]
    key: str
    raw: bytes
    seen: bool
    flagged: bool
    epoch: int


def load_corpus(path: Path = CORPUS) -> list[Template]:
    """Every message file of the Maildir, in a stable order (folder, name)."""
    templates: list[Template] = []
    folders: list[tuple[tuple[str, ...], Path]] = [((), path)]
    folders += sorted(
        (tuple(p.name[1:].split(".")), p)
        for p in path.iterdir()
        if p.is_dir() and p.name.startswith(".")
    )
    for parts, directory in folders:
        for sub in ("new", "cur"):
            for file in sorted((directory / sub).iterdir()):
                flags = file.name.partition(":2,")[2]
                raw = file.read_bytes()
                templates.append(
                    Template(
                        parts,
                        file.name,
                        raw,
                        sub == "cur" and "S" in flags,
                        "F" in flags,
                        delivery_epoch(raw),
                    )
                )
    return templates


def variant(template: Template, user: int, copy: int, copies: int, low: int, span: int) -> bytes:
    """The template as copy ``copy`` of user ``user``: own ids, moved in time."""
    suffix = f".v{user + 1}c{copy}"
    raw = rewrite_message_ids(
        template.raw, suffix, fallback_id=f"vol-{user + 1}-{copy}-{template.key[:24]}@bench.invalid"
    )
    moved = SPREAD_START + ((SPREAD_SECONDS - span) * copy) // max(copies, 1) + template.epoch - low
    stamp = email.utils.formatdate(moved, usegmt=True).encode()
    headers = header_block(raw)
    body = raw[len(headers) :]
    headers = _DATE_HEADER.sub(b"Date: " + stamp + b"\n", headers, count=1)
    received = b"Received: by volume.bench.invalid; " + stamp + b"\n"
    if headers.startswith(b"From "):
        first, _, rest = headers.partition(b"\n")
        headers = first + b"\n" + received + rest
    else:
        headers = received + headers
    return headers + body


# ------------------------------------------------------------------------ build


def ensure_database(drop: bool) -> None:
    """Create the bench database (after dropping it with ``drop``)."""
    from sqlalchemy import create_engine, text

    admin = create_engine(database_url("postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        if drop:
            connection.execute(text(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))
        exists = connection.scalar(
            text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": DATABASE}
        )
        if not exists:
            connection.execute(text(f"CREATE DATABASE {DATABASE}"))
    admin.dispose()


def plan(messages: int, users: int, per_copy: int) -> list[tuple[int, int, int, int]]:
    """The blocks: (user, block, first position, end position) in the user's stream."""
    blocks: list[tuple[int, int, int, int]] = []
    per_block = BLOCK_COPIES * per_copy
    for user in range(users):
        count = messages // users + (1 if user < messages % users else 0)
        for block, start in enumerate(range(0, count, per_block)):
            blocks.append((user, block, start, min(start + per_block, count)))
    return blocks


def vacuum(store: Any) -> float:
    """VACUUM (ANALYZE) the whole database; its seconds.

    What autovacuum does on a server where it is on (the default; the test server
    here runs with it off): planner statistics, and the visibility map that lets
    ``max(seq)`` and counts be index-only scans.
    """
    start = time.perf_counter()
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM (ANALYZE)")
    return time.perf_counter() - start


def build(messages: int, users: int, drop: bool) -> None:
    """Fill the bench database up to ``messages`` messages; resumes a killed build."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from sqlalchemy import text

    from mailroom.providers.local.importer import import_path
    from mailroom.providers.local.source import LocalMessage, LocalSource
    from mailroom.store import open_store

    ensure_database(drop)
    store = open_store(database_url())
    with store.session() as session:
        session.execute(
            text(
                "CREATE TABLE IF NOT EXISTS bench_volume_blocks (user_name text, block int,"
                " messages int, seconds real, done_at timestamptz DEFAULT now(),"
                " PRIMARY KEY (user_name, block))"
            )
        )
    with store.session() as session:
        done = {
            (row[0], row[1]): row[2]
            for row in session.execute(
                text("SELECT user_name, block, messages FROM bench_volume_blocks")
            )
        }
    templates = load_corpus()
    per_copy = len(templates)
    low = min(t.epoch for t in templates)
    span = max(t.epoch for t in templates) - low
    blocks = plan(messages, users, per_copy)
    copies_per_user = -(-messages // users // per_copy)
    todo = [b for b in blocks if done.get((user_name(b[0]), b[1])) != b[3] - b[2]]
    print(
        f"{database_url()}: {len(blocks)} blocks for {messages:,} messages over {users} users;"
        f" {len(blocks) - len(todo)} done, {len(todo)} to build",
        file=sys.stderr,
    )

    class Generated(LocalSource):
        kind = "generated"

        def __init__(self, user: int, start: int, end: int) -> None:
            super().__init__(CORPUS)
            self.user, self.start, self.end = user, start, end

        def count(self) -> int:
            return self.end - self.start

        def messages(self) -> Iterator[LocalMessage]:
            for position in range(self.start, self.end):
                copy, index = divmod(position, per_copy)
                template = templates[index]
                raw = variant(template, self.user, copy, copies_per_user, low, span)
                shift = ((SPREAD_SECONDS - span) * copy) // copies_per_user
                when = datetime.fromtimestamp(SPREAD_START + shift + template.epoch - low, UTC)
                yield LocalMessage(
                    template.folder,
                    f"c{copy}/{template.key}",
                    raw,
                    template.seen,
                    when,
                    flagged=template.flagged,
                )

    total = sum(end - start for _, _, start, end in blocks)
    last_block = {user: block for user, block, _, _ in blocks}
    already = total - sum(end - start for _, _, start, end in todo)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:>6.0f} msg/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, refresh_per_second=2) as progress:
        task = progress.add_task("building", total=total, completed=already, rate=0.0)
        begun, built = time.perf_counter(), 0
        for user, block, start, end in todo:
            name = user_name(user)
            progress.update(task, description=f"{name} block {block + 1}")

            def advance(count: int) -> None:
                nonlocal built
                built += count
                rate = built / max(time.perf_counter() - begun, 1e-9)
                progress.update(task, advance=count, rate=rate)

            started = time.perf_counter()
            summary = import_path(
                store,
                CORPUS,
                owner=name,
                account=ACCOUNT,
                progress=advance,
                source=Generated(user, start, end),
            )
            if summary.failed:
                progress.console.print(f"{name} block {block}: {summary.line()}")
            with store.session() as session:
                session.execute(
                    text(
                        "INSERT INTO bench_volume_blocks (user_name, block, messages, seconds)"
                        " VALUES (:u, :b, :m, :s) ON CONFLICT (user_name, block) DO UPDATE"
                        " SET messages = excluded.messages, seconds = excluded.seconds,"
                        " done_at = now()"
                    ),
                    {"u": name, "b": block, "m": end - start, "s": time.perf_counter() - started},
                )
            if block == last_block[user]:
                progress.update(task, description=f"{name}: VACUUM (ANALYZE)")
                vacuum(store)
    with store.session() as session:
        stored = session.scalar(text("SELECT count(*) FROM messages"))
    seconds = time.perf_counter() - begun
    print(
        f"built {built:,} messages in {seconds:.0f} s"
        f" ({built / max(seconds, 1e-9):.0f} msg/s); the store holds {stored:,} messages",
        file=sys.stderr,
    )
    store.dispose()


# --------------------------------------------------------------------- measuring

PERCENTILES = ("p50", "p95", "p99", "max")
USING = ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"]
#: Search queries, with the share of corpus messages holding every word (subject or body).
SEARCHES = {
    "common: the": "the",
    "common: mailing list": "mailing list",
    "mid: linux kernel": "linux kernel",
    "mid: spamassassin razor": "spamassassin razor",
    "rare: python": "python",
    "rare: toshiba": "toshiba",
    "none: guinness nvidia": "guinness nvidia",
}


def list_request(account: str, condition: dict[str, Any], total: bool = False) -> dict[str, Any]:
    """Email/query (newest first, one per thread, 50) + Email/get of the 50: the list view."""
    return jmap_request(account, "", total, (condition, NEWEST_FIRST))


def thread_request(account: str, thread: str) -> dict[str, Any]:
    """Thread/get of one thread + Email/get of its messages with their text: opening it."""
    get = {
        "accountId": account,
        "#ids": {"resultOf": "t", "name": "Thread/get", "path": "/list/*/emailIds"},
        "properties": [*PROPERTIES, "to", "cc", "textBody", "bodyValues"],
        "fetchTextBodyValues": True,
    }
    return {
        "using": USING,
        "methodCalls": [
            ["Thread/get", {"accountId": account, "ids": [thread]}, "t"],
            ["Email/get", get, "g"],
        ],
    }


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    cut = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50": statistics.median(ordered), "p95": cut[94], "p99": cut[98], "max": ordered[-1]}


@dataclass
class Principal:
    """One bench user as the measurements see it."""

    name: str
    account: str
    inbox: str
    token: str
    messages: int
    inbox_threads: int


def principals(store: Any, names: list[str]) -> list[Principal]:
    """A fresh API token, the JMAP account and the Inbox of each user that has mail."""
    from sqlalchemy import func, select

    from mailroom.jmap.auth import create_token
    from mailroom.labels.resolver import system_label
    from mailroom.owners import get_user
    from mailroom.store.models import Message, ThreadLabel

    found: list[Principal] = []
    for name in names:
        with store.session() as session:
            try:
                user = get_user(session, name)
            except Exception:  # noqa: BLE001 - a user the build did not reach
                continue
            count = session.scalar(select(func.count()).where(Message.user_id == user.id)) or 0
            if not count:
                continue
            inbox = system_label(session, user.id, "inbox").id
            threads = session.scalar(select(func.count()).where(ThreadLabel.label_id == inbox))
            token = create_token(session, name, "pg-volume bench")
            found.append(Principal(name, f"u{user.id}", f"L{inbox}", token, count, threads or 0))
    return found


@contextmanager
def served(url: str) -> Iterator[str]:
    """``mailroom serve`` on the database in a child process; yields its base URL."""
    import httpx

    port = free_port()
    env = {**os.environ, "MAILROOM_DATABASE_URL": url, "PYTHONPATH": str(ROOT / "src")}
    server = subprocess.Popen(
        [sys.executable, "-m", "mailroom", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/health")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("mailroom serve did not start") from None
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def measure(rounds: int, runs: int, users: int) -> dict[str, Any]:
    """p50/p95/p99 over real HTTP, per case, ``runs`` times; prints the medians."""
    import httpx

    from mailroom.store import open_store

    store = open_store(database_url(), migrate=False)
    people = principals(store, [user_name(i) for i in range(users)])
    if not people:
        raise SystemExit("the bench store has no mail yet; run: python bench/pg_volume.py build")
    with store.session() as session:
        from sqlalchemy import text

        total = session.scalar(text("SELECT count(*) FROM messages"))
    store.dispose()
    print(
        f"store: {total:,} messages; measured users: "
        + ", ".join(
            f"{p.name} ({p.messages:,} msgs, {p.inbox_threads:,} inbox threads)" for p in people
        ),
        file=sys.stderr,
    )
    results: dict[str, list[dict[str, float]]] = {}
    load_before = os.getloadavg()[0]
    with served(database_url()) as base:
        clients = {
            p.name: httpx.Client(headers={"Authorization": f"Bearer {p.token}"}, timeout=120)
            for p in people
        }
        session_url = f"{base}/.well-known/jmap"
        api = clients[people[0].name].get(session_url).json()["apiUrl"]

        def post(person: Principal, body: dict[str, Any]) -> dict[str, Any]:
            answer = clients[person.name].post(api, json=body)
            answer.raise_for_status()
            document: dict[str, Any] = answer.json()
            for response in document["methodResponses"]:
                if response[0] == "error":
                    raise SystemExit(f"JMAP error: {response}")
            return document

        threads: dict[str, list[str]] = {}
        for person in people:
            page = post(person, list_request(person.account, {"inMailbox": person.inbox}))
            threads[person.name] = [e["threadId"] for e in page["methodResponses"][1][1]["list"]]

        cases: dict[str, Callable[[Principal, int], dict[str, Any]]] = {
            "inbox": lambda p, i: list_request(p.account, {"inMailbox": p.inbox}),
            "inbox calculateTotal": lambda p, i: list_request(
                p.account, {"inMailbox": p.inbox}, True
            ),
            "thread open": lambda p, i: thread_request(
                p.account, threads[p.name][i % len(threads[p.name])]
            ),
        }
        for label, words in SEARCHES.items():
            cases[f"search {label}"] = lambda p, i, words=words: list_request(
                p.account, {"text": words}
            )
        for run in range(runs):
            for name, make in cases.items():
                count = rounds if not name.startswith("search") else max(rounds // 4, 20)
                for i in range(max(3, count // 20)):  # warm-up
                    post(people[i % len(people)], make(people[i % len(people)], i))
                samples: list[float] = []
                for i in range(count):
                    person = people[i % len(people)]
                    body = make(person, i)
                    start = time.perf_counter()
                    post(person, body)
                    samples.append((time.perf_counter() - start) * 1000)
                row = percentiles(samples)
                results.setdefault(name, []).append(row)
                print(
                    f"run {run + 1} {name:<36}" + "".join(f"{row[k]:>9.1f}" for k in PERCENTILES),
                    file=sys.stderr,
                )
        for client in clients.values():
            client.close()
    load = (round(load_before, 2), round(os.getloadavg()[0], 2))
    print(f"load average (1 min) before/after: {load[0]} / {load[1]} on {os.cpu_count()} CPUs")
    print(f"{'median of ' + str(runs) + ' runs (ms)':<44}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}")
    medians: dict[str, dict[str, float]] = {}
    for name, rows in results.items():
        medians[name] = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(
            f"{name:<44}"
            + "".join(f"{medians[name][k]:>9.1f}" for k in ("p50", "p95", "p99", "max"))
        )
    report = {"messages": total, "users": [p.name for p in people], "load": load, **medians}
    print(json.dumps(report))
    return report


def explain(users: int, slowest: int) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of the statements behind the inbox, a search and a thread.

    Each request runs in-process (``Dispatcher.run``) with every statement it sends
    recorded; the ``slowest`` of each (by their own time) are explained with the
    parameters they had, and their plans printed.
    """
    from sqlalchemy import event

    from mailroom.jmap.auth import Principal as JmapPrincipal
    from mailroom.jmap.dispatcher import Dispatcher, Limits
    from mailroom.jmap.methods import METHODS
    from mailroom.jmap.session import CAPABILITIES, session_state
    from mailroom.owners import get_user
    from mailroom.store import open_store

    store = open_store(database_url(), migrate=False)
    person = principals(store, [user_name(i) for i in range(users)])[0]
    with store.session() as session:
        user_id = get_user(session, person.name).id
    principal = JmapPrincipal(user_id, person.name)
    dispatcher = Dispatcher(store, METHODS, CAPABILITIES, Limits(), session_state)

    def run(body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = dispatcher.run(
            principal, dispatcher.parse(json.dumps(body).encode())
        )
        return answer

    first = run(list_request(person.account, {"inMailbox": person.inbox}))
    thread = first["methodResponses"][1][1]["list"][0]["threadId"]
    cases = {
        "inbox": list_request(person.account, {"inMailbox": person.inbox}),
        "inbox calculateTotal": list_request(person.account, {"inMailbox": person.inbox}, True),
        "search 'mailing list'": list_request(person.account, {"text": "mailing list"}),
        "search 'python'": list_request(person.account, {"text": "python"}),
        "thread open": thread_request(person.account, thread),
    }
    recorded: list[tuple[str, Any, float]] = []
    started: dict[int, float] = {}

    def before(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        started[id(cursor)] = time.perf_counter()

    def after(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        if not many and statement.lstrip().upper().startswith(("SELECT", "WITH")):
            took = (time.perf_counter() - started.pop(id(cursor), time.perf_counter())) * 1000
            recorded.append((statement, parameters, took))

    print(
        f"EXPLAIN on {person.name}: {person.messages:,} messages,"
        f" {person.inbox_threads:,} inbox threads"
    )
    for name, body in cases.items():
        run(body)  # warm
        recorded.clear()
        event.listen(store.engine, "before_cursor_execute", before)
        event.listen(store.engine, "after_cursor_execute", after)
        try:
            run(body)
        finally:
            event.remove(store.engine, "before_cursor_execute", before)
            event.remove(store.engine, "after_cursor_execute", after)
        total = sum(took for _, _, took in recorded)
        print(f"\n=== {name}: {len(recorded)} statements, {total:.1f} ms in the database")
        for statement, parameters, took in sorted(recorded, key=lambda r: -r[2])[:slowest]:
            print(f"\n--- {took:.1f} ms: {' '.join(statement.split())[:400]}")
            with store.engine.connect() as connection:
                plan = connection.exec_driver_sql(
                    "EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters
                ).all()
            for (line,) in plan:
                print(f"    {line}")
    store.dispose()


def import_rate(messages: int, workers: int, accounts: int, runs: int, redis_url: str) -> None:
    """New mail into the big store through IMAP and ``workers`` worker processes.

    Per run: a private Dovecot gets ``accounts`` users holding ``messages`` new
    generated messages between them; each becomes an IMAP account of a bench user
    (vol01, vol02, ...); after the discovery sync (not timed) every account's
    ``import_page`` job is queued on Redis and ``workers`` ``mailroom worker``
    processes import the pages (fetch, parse, store, thread, index). Timed from
    the enqueue to the last message stored.
    """
    import uuid

    from sqlalchemy import func, select, update

    from mailroom.config import Settings
    from mailroom.jobs.queues import make_queues
    from mailroom.jobs.tasks import Jobs
    from mailroom.providers import registry
    from mailroom.providers.imap import add_imap_account
    from mailroom.secrets import generate_key
    from mailroom.store import open_store
    from mailroom.store.models import Account, Message

    sys.path.insert(0, str(ROOT))
    from tests.support.dovecot import DovecotServer

    templates = load_corpus()
    rates: list[float] = []
    for run in range(runs):
        work = Path(tempfile.mkdtemp(prefix="pg-volume-import-"))
        server = DovecotServer(work / "dovecot")
        tag = uuid.uuid4().hex[:6]
        names = [f"imp{tag}x{i}" for i in range(accounts)]
        for name in names:
            server.add_user(name, "volume-pw")
        for n in range(messages):
            template = templates[n % len(templates)]
            copy = n // len(templates)
            raw = variant(template, 1000 + run * 100 + n % accounts, copy, 1, 0, 0)
            server.deliver(names[n % accounts], raw, flags="S" if template.seen else "")
        server.start()
        key = generate_key()
        namespace = f"volume{uuid.uuid4().hex[:8]}"
        settings = Settings(
            master_key=key,
            allowed_private_hosts="127.0.0.1",
            data_dir=work / "data",
            database_url=database_url(),
            redis_url=redis_url,
            namespace=namespace,
        )
        store = open_store(database_url(), migrate=False)
        ids = [
            add_imap_account(
                store,
                settings,
                name=f"imap-{name}",
                host=server.host,
                port=server.port,
                tls="none",
                login=name,
                password="volume-pw",
                owner=user_name(i % 10),
            )
            for i, name in enumerate(names)
        ]
        syncer = registry.syncer_for(store, "imap", settings)
        assert syncer is not None
        for account_id in ids:
            syncer.sync(account_id)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT / "src"),
            "MAILROOM_DATABASE_URL": database_url(),
            "MAILROOM_REDIS_URL": redis_url,
            "MAILROOM_NAMESPACE": namespace,
            "MAILROOM_MASTER_KEY": key,
            "MAILROOM_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
            "MAILROOM_DATA_DIR": str(work / "data"),
        }
        logs = [(work / f"worker{i}.log").open("wb") for i in range(workers)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "mailroom", "worker", "--queues", "all"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
            for log in logs
        ]
        try:
            time.sleep(3)  # the workers are up before the clock starts
            jobs = Jobs(store, make_queues(settings), settings)
            begun = time.perf_counter()
            for account_id in ids:
                jobs.import_page(account_id)
            stored = 0
            while stored < messages:
                time.sleep(0.5)
                with store.session() as session:
                    stored = (
                        session.scalar(select(func.count()).where(Message.account_id.in_(ids))) or 0
                    )
                if time.perf_counter() - begun > 1800 or any(p.poll() is not None for p in procs):
                    raise SystemExit(f"the import stalled at {stored} of {messages}; see {work}")
            seconds = time.perf_counter() - begun
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=60)
            server.stop()
            with store.session() as session:  # its Dovecot is gone: nothing polls it again
                session.execute(
                    update(Account)
                    .where(Account.id.in_(ids))
                    .values(status="disconnected", status_reason="pg_volume bench: server gone")
                )
            store.dispose()
        rates.append(messages / seconds)
        print(
            f"run {run + 1}: {messages:,} messages in {seconds:.1f} s = {rates[-1]:.0f} msg/s"
            f" ({workers} workers, {accounts} IMAP accounts, load {os.getloadavg()[0]:.2f})",
            file=sys.stderr,
        )
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"import with {workers} workers: median {statistics.median(rates):.0f} msg/s"
        f" over {runs} runs"
    )


def change_rows(store: Any) -> int:
    from sqlalchemy import text

    with store.session() as session:
        return int(session.scalar(text("SELECT count(*) FROM changes")) or 0)


def prune(keep_minutes: float) -> None:
    """The change-log retention prune (``jmap.changes.prune_changes``, the job's function)."""
    from datetime import timedelta

    from mailroom.jmap.changes import prune_changes
    from mailroom.store import open_store

    store = open_store(database_url(), migrate=False)
    before = change_rows(store)
    start = time.perf_counter()
    deleted = prune_changes(store, datetime.now(UTC) - timedelta(minutes=keep_minutes))
    seconds = time.perf_counter() - start
    after = change_rows(store)
    print(
        f"change log: {before:,} rows before, {deleted:,} deleted in {seconds:.1f} s"
        f" (rows older than {keep_minutes:g} minutes), {after:,} rows after"
    )
    store.dispose()


def size() -> None:
    """pg_database_size and the largest tables (with indexes and TOAST)."""
    from sqlalchemy import text

    from mailroom.store import open_store

    store = open_store(database_url(), migrate=False)
    with store.session() as session:
        messages = int(session.scalar(text("SELECT count(*) FROM messages")) or 0)
        total = int(session.scalar(text("SELECT pg_database_size(current_database())")) or 0)
        rows = session.execute(
            text(
                "SELECT relname, pg_total_relation_size(c.oid), pg_relation_size(c.oid),"
                " pg_indexes_size(c.oid) FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public'"
                " ORDER BY 2 DESC LIMIT 14"
            )
        ).all()
    store.dispose()
    mib = 1024 * 1024
    print(
        f"{messages:,} messages; database {total / mib:,.0f} MiB"
        f" = {total / max(messages, 1) * 100_000 / mib:,.0f} MiB per 100,000 messages"
    )
    print(f"{'table':<22}{'total MiB':>11}{'heap MiB':>10}{'index MiB':>11}")
    for name, whole, heap, index in rows:
        print(f"{name:<22}{whole / mib:>11,.0f}{heap / mib:>10,.0f}{index / mib:>11,.0f}")


# ------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="build or finish the big store")
    build_parser.add_argument("--messages", type=int, default=1_000_000)
    build_parser.add_argument("--users", type=int, default=10)
    build_parser.add_argument("--drop", action="store_true", help="drop the database first")
    measure_parser = commands.add_parser("measure", help="JMAP list, thread and search p95")
    measure_parser.add_argument("--rounds", type=int, default=200)
    measure_parser.add_argument("--runs", type=int, default=3)
    measure_parser.add_argument("--users", type=int, default=10, help="measure over these users")
    explain_parser = commands.add_parser("explain", help="plans of the inbox, search, thread")
    explain_parser.add_argument("--users", type=int, default=1)
    explain_parser.add_argument("--slowest", type=int, default=3, help="statements per request")
    rate_parser = commands.add_parser("import-rate", help="new mail through IMAP and workers")
    rate_parser.add_argument("--messages", type=int, default=12_000, help="per run")
    rate_parser.add_argument("--workers", type=int, default=2)
    rate_parser.add_argument("--accounts", type=int, default=4)
    rate_parser.add_argument("--runs", type=int, default=3)
    rate_parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    prune_parser = commands.add_parser("prune", help="the change-log retention prune")
    prune_parser.add_argument("--keep-minutes", type=float, default=10.0)
    commands.add_parser("size", help="database and table sizes")
    args = parser.parse_args()
    os.environ.setdefault("MAILROOM_LOG_LEVEL", "WARNING")
    if args.command == "build":
        build(args.messages, args.users, args.drop)
    elif args.command == "measure":
        measure(args.rounds, args.runs, args.users)
    elif args.command == "explain":
        explain(args.users, args.slowest)
    elif args.command == "import-rate":
        import_rate(args.messages, args.workers, args.accounts, args.runs, args.redis_url)
    elif args.command == "prune":
        prune(args.keep_minutes)
    elif args.command == "size":
        size()


if __name__ == "__main__":
    main()
