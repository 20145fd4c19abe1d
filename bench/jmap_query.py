"""JMAP list-view latency: Email/query (inbox, collapseThreads, limit 50) + Email/get of the 50.

    python bench/jmap_query.py [--maildir DIR] [--db FILE] [--rounds N] [--extra-rounds N]
                               [--rebuild]

The store is a SQLite file (default ``bench/.work/jmap-bench.sqlite3``, git-ignored),
built once by importing the Maildir (default ``bench/.work/corpus-x5``, made by
``python bench/corpus.py bench/.work/corpus-x5 --copies 5``: ~30,000 messages) and
reused by later runs. Each round is one JMAP request holding both calls, the get
fed by a result reference — what a mail client sends to show the first page.

Two measurements:

* ``in-process``: ``Dispatcher.run`` on the parsed request (database and JMAP
  work only);
* ``http``: the whole round trip to ``mailroom serve`` running in a child
  process (JSON, HTTP on loopback, bearer-token auth included).

Each is run without and with ``calculateTotal``. Then, in-process only and for
``--extra-rounds`` rounds, the same page with other queries: the inbox sorted by
subject (RFC 5256 base subject, then newest first), the inbox filtered by a
header (``X-Mailer`` containing "outlook") and the inbox sorted by size (largest
first: ordered by the database). Prints p50/p95/p99/max in ms and
the load average, since other work on the machine shows in the tail latencies.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work"
PROPERTIES = [
    "id",
    "threadId",
    "mailboxIds",
    "keywords",
    "from",
    "subject",
    "receivedAt",
    "preview",
    "hasAttachment",
    "size",
]


def build(db: Path, maildir: Path) -> None:
    """Import the Maildir into a fresh SQLite store at ``db``."""
    from mailroom.providers.local import import_path
    from mailroom.store import open_store

    if not maildir.is_dir():
        raise SystemExit(
            f"{maildir} is missing; make it with: python bench/corpus.py {maildir} --copies 5"
        )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    store = open_store(f"sqlite:///{db}")
    start = time.perf_counter()
    summary = import_path(store, maildir, owner="me", account="bench")
    print(f"imported {summary.line()} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    store.dispose()


NEWEST_FIRST = [{"property": "receivedAt", "isAscending": False}]


def extra_queries(inbox: str) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The other measured queries: name -> (filter, sort)."""
    return {
        "subject sort": (
            {"inMailbox": inbox},
            [{"property": "subject"}, *NEWEST_FIRST],
        ),
        "header filter": ({"inMailbox": inbox, "header": ["X-Mailer", "outlook"]}, NEWEST_FIRST),
        "size sort": ({"inMailbox": inbox}, [{"property": "size", "isAscending": False}]),
    }


def request(
    account: str,
    inbox: str,
    total: bool,
    query: tuple[dict[str, Any], list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The list-view request (or the same page for another filter and sort)."""
    condition, sort = query or ({"inMailbox": inbox}, NEWEST_FIRST)
    return {
        "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [
            [
                "Email/query",
                {
                    "accountId": account,
                    "filter": condition,
                    "sort": sort,
                    "collapseThreads": True,
                    "position": 0,
                    "limit": 50,
                    "calculateTotal": total,
                },
                "q",
            ],
            [
                "Email/get",
                {
                    "accountId": account,
                    "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"},
                    "properties": PROPERTIES,
                },
                "g",
            ],
        ],
    }


def measure(run: Callable[[], dict[str, Any]], rounds: int) -> dict[str, float]:
    """Latency percentiles (ms) of ``run`` after a warm-up; checks every answer."""
    for _ in range(max(10, rounds // 20)):
        run()
    samples: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        answer = run()
        samples.append((time.perf_counter() - start) * 1000)
        responses = answer["methodResponses"]
        assert responses[0][0] == "Email/query" and responses[1][0] == "Email/get", responses
        assert len(responses[1][1]["list"]) == 50
    samples.sort()
    cut = statistics.quantiles(samples, n=100)
    return {
        "p50": statistics.median(samples),
        "p95": cut[94],
        "p99": cut[98],
        "max": samples[-1],
    }


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def main() -> None:
    """Build the store if needed, then measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--maildir", type=Path, default=WORK / "corpus-x5")
    parser.add_argument("--db", type=Path, default=WORK / "jmap-bench.sqlite3")
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--extra-rounds", type=int, default=100, help="rounds of the other queries")
    parser.add_argument("--rebuild", action="store_true", help="import the Maildir again")
    args = parser.parse_args()
    if args.rebuild or not args.db.exists():
        args.db.parent.mkdir(parents=True, exist_ok=True)
        build(args.db, args.maildir)

    import httpx
    from sqlalchemy import func, select

    from mailroom.jmap.auth import Principal, create_token
    from mailroom.jmap.dispatcher import Dispatcher, Limits
    from mailroom.jmap.methods import METHODS
    from mailroom.jmap.session import CAPABILITIES, session_state
    from mailroom.labels.resolver import system_label
    from mailroom.owners import get_user
    from mailroom.store import open_store
    from mailroom.store.models import Message, ThreadLabel

    url = f"sqlite:///{args.db}"
    load_before = os.getloadavg()[0]
    store = open_store(url)
    with store.session() as session:
        user = get_user(session, "me")
        inbox_id = system_label(session, user.id, "inbox").id
        messages = session.scalar(select(func.count()).select_from(Message))
        inbox_threads = session.scalar(select(func.count()).where(ThreadLabel.label_id == inbox_id))
        token = create_token(session, "me", "bench")
        principal = Principal(user.id, user.name)
    account, inbox = f"u{principal.user_id}", f"L{inbox_id}"
    print(f"store: {messages} messages, {inbox_threads} inbox threads", file=sys.stderr)

    dispatcher = Dispatcher(store, METHODS, CAPABILITIES, Limits(), session_state)
    results: dict[str, dict[str, float]] = {}
    for total in (False, True):
        document = dispatcher.parse(json.dumps(request(account, inbox, total)).encode())
        results[f"in-process total={total}"] = measure(
            partial(dispatcher.run, principal, document), args.rounds
        )
    for name, query in extra_queries(inbox).items():
        for total in (False, True):
            document = dispatcher.parse(json.dumps(request(account, inbox, total, query)).encode())
            results[f"{name} total={total}"] = measure(
                partial(dispatcher.run, principal, document), args.extra_rounds
            )
    store.dispose()

    port = free_port()
    env = {**os.environ, "MAILROOM_DATABASE_URL": url}
    server = subprocess.Popen(
        [sys.executable, "-m", "mailroom", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            deadline = time.monotonic() + 30
            while True:
                try:
                    http.get(f"{base}/health")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            api = http.get(f"{base}/.well-known/jmap").json()["apiUrl"]

            def post(body: str) -> dict[str, Any]:
                answer: dict[str, Any] = http.post(
                    api, content=body, headers={"Content-Type": "application/json"}
                ).json()
                return answer

            for total in (False, True):
                body = json.dumps(request(account, inbox, total))
                results[f"http total={total}"] = measure(partial(post, body), args.rounds)
    finally:
        server.terminate()
        server.wait(timeout=30)

    load = (round(load_before, 2), round(os.getloadavg()[0], 2))
    print(f"load average (1 min) before/after: {load[0]} / {load[1]} on {os.cpu_count()} CPUs")
    print(
        f"{'measurement':<30}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}"
        f"  (ms, {args.rounds} rounds; {args.extra_rounds} for the other queries)"
    )
    for name, row in results.items():
        print(f"{name:<30}" + "".join(f"{row[k]:>8.2f}" for k in ("p50", "p95", "p99", "max")))
    print(
        json.dumps({"messages": messages, "inbox_threads": inbox_threads, "load": load, **results})
    )


if __name__ == "__main__":
    main()
