"""Web page server time: the Inbox page and a thread page on the ~30,000-message store.

    python bench/web_pages.py [--maildir DIR] [--db FILE] [--rounds N] [--runs N] [--rebuild]

The store is the JMAP bench's (``bench/jmap_query.py``: a SQLite file, default
``bench/.work/jmap-bench.sqlite3``, built once from ``bench/.work/corpus-x5``, made by
``python bench/corpus.py bench/.work/corpus-x5 --copies 5``) and is reused. The user
``me`` gets a web session (``web.sessions.start_session``, the cookie a sign-in sets).

Pages, each a signed-in ``GET`` whose whole HTML is read:

* ``inbox``: ``/``, the unified Inbox on the Primary tab (the tabs bar's unread counts,
  the sidebar's counts, the first page of thread rows);
* ``inbox, older page``: the Inbox's second page through its ``before`` keyset cursor;
* ``thread``: ``/threads/ID`` of the newest Inbox thread with at least three messages
  (already read after the warm-up, so no round writes).

Three measurements per page:

* ``server``: the server's own time — ``web.app.create_app`` under uvicorn in this
  process, each request timed from its arrival at the app to the last byte of its
  answer (:class:`ServerTimer`: routing, session check, database, templates);
* ``server, CPU``: the CPU time the process spent in that span (the app's own work,
  which other programs' load on the machine hardly changes);
* ``http``: the round trip to ``mailroom serve`` in a child process over loopback.

Each measurement is ``--runs`` runs of ``--rounds`` requests after a warm-up; the
table is the median over the runs of each percentile (ms), with the load average, since
other work on the machine shows in the tail.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jmap_query import WORK, build, free_port  # noqa: E402

Fetch = Callable[[str], httpx.Response]


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50/p95/p99/max of ``samples`` (ms)."""
    ordered = sorted(samples)
    cut = statistics.quantiles(ordered, n=100)
    return {"p50": statistics.median(ordered), "p95": cut[94], "p99": cut[98], "max": ordered[-1]}


def measure(
    fetch: Fetch, path: str, rounds: int, runs: int, timer: ServerTimer | None = None
) -> dict[str, dict[str, float]]:
    """The median over ``runs`` of each percentile of ``rounds`` GETs of ``path``:
    ``wall`` the client's round trip, or with ``timer`` the server's time, and then
    also ``cpu``, the server's CPU time."""

    def get() -> None:
        answer = fetch(path)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
        assert "</html>" in answer.text

    for _ in range(max(10, rounds // 10)):
        get()
    per_run: dict[str, list[dict[str, float]]] = {"wall": [], "cpu": []}
    for _ in range(runs):
        walls: list[float] = []
        cpus: list[float] = []
        for _ in range(rounds):
            start = time.perf_counter()
            get()
            wall = (time.perf_counter() - start) * 1000
            walls.append(timer.last if timer is not None else wall)
            cpus.append(timer.last_cpu if timer is not None else 0.0)
        per_run["wall"].append(percentiles(walls))
        per_run["cpu"].append(percentiles(cpus))
    kinds = ("wall", "cpu") if timer is not None else ("wall",)
    return {
        kind: {
            key: statistics.median(run[key] for run in per_run[kind]) for key in per_run[kind][0]
        }
        for kind in kinds
    }


def pages(db: Path) -> tuple[int, dict[str, str], dict[str, int]]:
    """The user id, the measured paths, and the store's size."""
    from sqlalchemy import func, select

    from mailroom.labels.resolver import system_label
    from mailroom.owners import get_user
    from mailroom.store import open_store
    from mailroom.store.models import Message, ThreadLabel

    store = open_store(f"sqlite:///{db}")
    try:
        with store.session() as session:
            user = get_user(session, "me")
            inbox = system_label(session, user.id, "inbox").id
            messages = session.scalar(select(func.count()).select_from(Message)) or 0
            threads = session.scalar(select(func.count()).where(ThreadLabel.label_id == inbox)) or 0
            thread = session.scalar(
                select(Message.thread_id)
                .join(ThreadLabel, ThreadLabel.thread_id == Message.thread_id)
                .where(ThreadLabel.label_id == inbox, Message.user_id == user.id)
                .group_by(Message.thread_id)
                .having(func.count() >= 3)
                .order_by(func.max(Message.received_at).desc())
                .limit(1)
            )
        assert thread is not None, "no Inbox thread with three messages"
        return (
            user.id,
            {"inbox": "/", "thread": f"/threads/{thread}"},
            {"messages": messages, "inbox_threads": threads},
        )
    finally:
        store.dispose()


def older_page(fetch: Fetch) -> dict[str, str]:
    """The Inbox's second page (its "Older" link), if it has one."""
    found = re.search(r'href="(/\?[^"]*before=[^"]+)" rel="next"', fetch("/").text)
    return {"inbox, older page": found.group(1).replace("&amp;", "&")} if found else {}


def session_cookie(db: Path, user_id: int) -> str:
    """A web session of the user (what signing in sets)."""
    from mailroom.store import open_store
    from mailroom.web.sessions import start_session

    store = open_store(f"sqlite:///{db}")
    try:
        return start_session(store, user_id, "bench/web_pages.py")
    finally:
        store.dispose()


class ServerTimer:
    """ASGI middleware: how long the app took for the last HTTP request, from its
    arrival to the last byte of the answer handed to the server (ms, ``last``), and
    the CPU time this process spent meanwhile (ms, ``last_cpu``: the app's work, hardly
    touched by other programs' load)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.last = 0.0
        self.last_cpu = 0.0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, cpu = time.perf_counter(), time.process_time()

        async def timed(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.last = (time.perf_counter() - start) * 1000
                self.last_cpu = (time.process_time() - cpu) * 1000

        await self.app(scope, receive, timed)


def in_process(
    db: Path, cookie: str, paths: dict[str, str], rounds: int, runs: int
) -> dict[str, dict[str, float]]:
    """The server's time for each page: the app under uvicorn in this process, timed
    by :class:`ServerTimer` while a loopback client asks."""
    import uvicorn

    from mailroom.store import open_store
    from mailroom.web.app import create_app

    store = open_store(f"sqlite:///{db}")
    timer = ServerTimer(create_app(store))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(timer, log_level="warning"))
    thread = threading.Thread(target=server.run, args=([listener],), daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise SystemExit("the in-process server did not start.")
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, cookies={"mailroom_session": cookie}, timeout=60) as http:
            paths = {**paths, **older_page(http.get)}
            results: dict[str, dict[str, float]] = {}
            for name, path in paths.items():
                measured = measure(http.get, path, rounds, runs, timer)
                results[name] = measured["wall"]
                results[f"{name}, CPU"] = measured["cpu"]
            return results
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()
        store.dispose()


def over_http(
    db: Path, cookie: str, paths: dict[str, str], rounds: int, runs: int
) -> dict[str, dict[str, float]]:
    """The pages from `mailroom serve` in a child process."""
    port = free_port()
    env = {
        **os.environ,
        "MAILROOM_DATABASE_URL": f"sqlite:///{db}",
        "MAILROOM_SUBMISSION_LISTEN": f"127.0.0.1:{free_port()}",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "mailroom", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, cookies={"mailroom_session": cookie}, timeout=60) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    http.get("/health")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            paths = {**paths, **older_page(http.get)}
            return {
                name: measure(http.get, path, rounds, runs)["wall"] for name, path in paths.items()
            }
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    """Build the store if needed, then measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--maildir", type=Path, default=WORK / "corpus-x5")
    parser.add_argument("--db", type=Path, default=WORK / "jmap-bench.sqlite3")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rebuild", action="store_true", help="import the Maildir again")
    args = parser.parse_args()
    if args.rebuild or not args.db.exists():
        args.db.parent.mkdir(parents=True, exist_ok=True)
        build(args.db, args.maildir)

    user_id, paths, size = pages(args.db)
    cookie = session_cookie(args.db, user_id)
    print(
        f"store: {size['messages']} messages, {size['inbox_threads']} inbox threads",
        file=sys.stderr,
    )
    load_before = os.getloadavg()[0]
    results = {
        **{
            f"server {k}": v
            for k, v in in_process(args.db, cookie, paths, args.rounds, args.runs).items()
        },
        **{
            f"http {k}": v
            for k, v in over_http(args.db, cookie, paths, args.rounds, args.runs).items()
        },
    }
    load = (round(load_before, 2), round(os.getloadavg()[0], 2))
    print(f"load average (1 min) before/after: {load[0]} / {load[1]} on {os.cpu_count()} CPUs")
    print(
        f"{'measurement':<32}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}"
        f"  (ms; median of {args.runs} runs of {args.rounds} requests)"
    )
    for name, row in results.items():
        print(f"{name:<32}" + "".join(f"{row[k]:>8.2f}" for k in ("p50", "p95", "p99", "max")))
    print(json.dumps({**size, "paths": paths, "load": load, **results}))


if __name__ == "__main__":
    main()
