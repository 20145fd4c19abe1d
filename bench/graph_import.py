"""Microsoft Graph import benchmark: 20,000 messages, 20 ms a request, four in flight.

    python bench/graph_import.py [--messages 20000] [--latency 0.02] [--workers 4]
                                 [--in-process] [--database-url URL] [--repeat N]

Issue 17's figure: the import of an emulated 20,000-message mailbox when every
Graph request takes ``--latency`` (20 ms) and Exchange's MailboxConcurrency
allows four requests of the mailbox in flight, against the theoretical minimum
for that limit: ``requests × latency / 4``.

The mailbox is spread over the folders an account has (Inbox, Sent Items,
Drafts, three user folders, Archive, Junk Email, Deleted Items). The import runs
as the import jobs do, through :class:`GraphImporter.import_page` (one page of
50 of one folder per call), in ``--workers`` threads that each take the next
page of a folder no other worker is on (:func:`import_pages`): the pages of one
folder follow each other by nature (each page's nextLink names the next), but
folders are independent. Inside a page the new messages' MIME is fetched
concurrently (:mod:`mailroom.providers.graph.intake`). Every request of the
mailbox shares the process's four slots, and the emulator answers a fifth with
429 MailboxConcurrency (counted: it must stay 0).

The emulator runs in a child process (as Graph is another machine), so its
work does not compete with the importer's threads for this interpreter's lock;
``--in-process`` runs it in a thread of this process instead.

Printed per run (JSON): messages stored, requests, throttled requests, the peak
in flight, the wall time, the minimum (``requests × latency / 4``) and the
ratio; with ``--repeat`` also the medians.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.provider_bench import repeat_runs, store_count  # noqa: E402
from tests.emulators.graph.server import GraphEmulator  # noqa: E402
from tests.providers.test_graph_contract import add_graph_account  # noqa: E402

from mailroom.config import Settings  # noqa: E402
from mailroom.providers.graph.folders import graph_folders, importing  # noqa: E402
from mailroom.providers.graph.importer import GraphImporter  # noqa: E402
from mailroom.providers.graph.limiter import MAILBOX_CONCURRENCY  # noqa: E402
from mailroom.secrets import generate_key  # noqa: E402
from mailroom.store import open_store  # noqa: E402
from mailroom.store.engine import Store  # noqa: E402

# Share of the mailbox per folder (well-known name, or a user folder's display name).
SPREAD = (
    ("inbox", 0.40),
    ("sentitems", 0.15),
    ("drafts", 0.005),
    ("Projects", 0.10),
    ("Receipts", 0.10),
    ("Travel", 0.10),
    ("archive", 0.12),
    ("junkemail", 0.015),
    ("deleteditems", 0.01),
)
START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


def raw_message(number: int, address: str) -> bytes:
    """A plain message of a usual size; every third one answers the one before."""
    root = number - number % 3
    replying = number % 3 != 0
    headers = [
        f"From: person{number % 97}@example.org",
        f"To: {address}",
        f"Subject: {'Re: ' if replying else ''}Topic {root}",
        f"Date: {(START + timedelta(minutes=17 * number)).strftime('%a, %d %b %Y %H:%M:%S +0000')}",
        f"Message-ID: <g{number}@example.org>",
    ]
    if replying:
        headers += [f"In-Reply-To: <g{number - 1}@example.org>"]
    body = f"Message number {number}.\r\n" + "Some text of a usual length. " * 20
    return ("\r\n".join(headers) + "\r\n\r\n" + body + "\r\n").encode()


def seed(graph: GraphEmulator, count: int) -> None:
    """``count`` messages spread over the folders as :data:`SPREAD` says."""
    mailbox = graph.mailbox()
    for name, _share in SPREAD:
        if name[0].isupper():
            mailbox.create_folder(name)
    folders = {f.display_name: f.id for f in mailbox.folders.values()}
    number = 0
    for index, (name, share) in enumerate(SPREAD):
        many = count - number if index == len(SPREAD) - 1 else round(count * share)
        where = folders.get(name, name)
        for _ in range(many):
            received = START + timedelta(minutes=17 * number)
            graph.add_message(
                raw_message(number, graph.default_address),
                where,
                received=received,
                is_read=number % 2 == 0,
            )
            number += 1


def import_pages(store: Store, settings: Settings, account_id: int, workers: int) -> None:
    """Import every folder, ``workers`` folders at a time, one page per call.

    A worker claims a folder still importing that no other worker holds and
    takes its pages one by one until it is done (the pages of a folder are a
    chain of nextLinks); folders go in rank order, as the importer takes them.
    """
    importer = GraphImporter(store, settings)
    importer.import_page(account_id, folder_id=None)  # discovers the folders, first page
    lock = threading.Lock()
    held: set[int] = set()
    errors: list[BaseException] = []

    def claim() -> int | None:
        with lock, store.session() as session:
            for folder in graph_folders(session, account_id):
                if importing(folder) and folder.id not in held:
                    held.add(folder.id)
                    return int(folder.id)
        return None

    def work() -> None:
        try:
            while (folder_id := claim()) is not None:
                while importer.import_page(account_id, folder_id=folder_id):
                    with store.session() as session:
                        if not any(
                            f.id == folder_id and importing(f)
                            for f in graph_folders(session, account_id)
                        ):
                            break
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


class RemoteGraph:
    """What ``add_graph_account`` reads of an emulator, as the child process told it."""

    def __init__(self, facts: dict[str, Any]) -> None:
        self.facts = facts
        self.default_address = str(facts["address"])
        self.graph_url = str(facts["graph_url"])

    def issue_tokens(self, address: str | None = None) -> dict[str, Any]:
        """The tokens the child issued for its mailbox."""
        return dict(self.facts["tokens"])

    def token_url(self) -> str:
        """The child's token endpoint."""
        return str(self.facts["token_url"])


def serve(conn: Any, messages: int) -> None:
    """The child: seed an emulator, tell its facts, then the log when told to stop."""
    with GraphEmulator() as graph:
        seed(graph, messages)
        conn.send(
            {
                "address": graph.default_address,
                "graph_url": graph.graph_url,
                "token_url": graph.token_url(),
                "tokens": graph.issue_tokens(),
            }
        )
        latency = conn.recv()
        graph.set_latency(latency)
        graph.requests.clear()
        conn.send("ready")
        conn.recv()
        conn.send(log_facts(graph))


def log_facts(graph: GraphEmulator) -> dict[str, int]:
    """Requests, MIME fetches, 429s and the peak in flight the emulator saw."""
    log = graph.graph_requests(parts=False)
    return {
        "requests": len(log),
        "mime_requests": sum(1 for r in log if r.path.endswith("/$value")),
        "throttled": sum(1 for r in log if r.status == 429),
        "peak_in_flight": graph.peak_in_flight(),
    }


def one_run(args: argparse.Namespace, database_url: str | None) -> dict[str, Any]:
    """Seed an emulator, import it into a fresh store, measure."""
    with tempfile.TemporaryDirectory(prefix="mailroom-graph-bench-") as work:
        data = Path(work) / "data"
        settings = Settings(
            master_key=generate_key(),
            allowed_private_hosts="127.0.0.1",
            data_dir=data,
            database_url=database_url,
        )
        store = open_store(settings.resolved_database_url, data)
        if args.in_process:
            with GraphEmulator() as graph:
                seed(graph, args.messages)
                account_id = add_graph_account(store, settings, graph)
                graph.set_latency(args.latency)
                graph.requests.clear()
                started = time.monotonic()
                import_pages(store, settings, account_id, args.workers)
                wall = time.monotonic() - started
                facts = log_facts(graph)
        else:
            parent, child = multiprocessing.get_context("fork").Pipe()
            process = multiprocessing.get_context("fork").Process(
                target=serve, args=(child, args.messages)
            )
            process.start()
            try:
                remote = RemoteGraph(parent.recv())
                account_id = add_graph_account(store, settings, remote)  # type: ignore[arg-type]
                parent.send(args.latency)
                parent.recv()
                started = time.monotonic()
                import_pages(store, settings, account_id, args.workers)
                wall = time.monotonic() - started
                parent.send("stop")
                facts = parent.recv()
            finally:
                process.join(30)
                if process.is_alive():
                    process.terminate()
        stored = store_count(store, account_id)
        store.dispose()
    minimum = facts["requests"] * args.latency / MAILBOX_CONCURRENCY
    return {
        "messages": args.messages,
        "stored": stored,
        **facts,
        "wall_s": round(wall, 2),
        "minimum_s": round(minimum, 2),
        "ratio": round(wall / minimum, 3) if minimum else None,
        "workers": args.workers,
        "emulator": "thread" if args.in_process else "process",
        "store": "postgresql" if database_url else "sqlite",
    }


def main() -> None:
    """Run the benchmark ``--repeat`` times; print each run and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per request")
    parser.add_argument("--workers", type=int, default=MAILBOX_CONCURRENCY, help="folders at once")
    parser.add_argument("--in-process", action="store_true", help="the emulator in a thread")
    parser.add_argument("--database-url", help="PostgreSQL URL of a database to recreate")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    repeat_runs(args, one_run, ("wall_s", "ratio"))


if __name__ == "__main__":
    main()
