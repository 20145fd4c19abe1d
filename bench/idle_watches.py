"""What an IMAP IDLE watch costs: a thread each, or one selector for all (issue 20 item 1).

    python bench/idle_watches.py --watches 1000 --mode mux
    python bench/idle_watches.py --watches 1000 --mode threads

In this process: a private Dovecot with ``--watches`` users (limits raised as in
bench/scale.py), a scratch PostgreSQL database with one IMAP account each, and
one watch per account — ``threads``: an ``ImapWatcher`` blocking in its own
thread (what the supervisor did before; started 8 at a time), ``mux``: a ``MuxWatcher`` on one
``IdleMux`` (one selector thread and 8 work threads). Printed: the process's RSS
before and once every account sits in IDLE (and the difference per watch), its
threads, the time to get every account into IDLE, CPU over ``--quiet`` seconds
with no mail, and how long stopping them all takes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scale import (  # noqa: E402
    PASSWORD,
    add_accounts,
    count_idling,
    database,
    dovecot_limits,
)
from tests.support.dovecot import DovecotServer  # noqa: E402

from mailroom.config import Settings  # noqa: E402
from mailroom.providers.imap import ImapWatcher, MuxWatcher  # noqa: E402
from mailroom.providers.imap.idle_mux import IdleMux  # noqa: E402
from mailroom.secrets import generate_key  # noqa: E402
from mailroom.store import open_store  # noqa: E402

# Threads are started this many at a time, each group once in IDLE: a thousand threads
# catching up at once wait on the 15 pooled database connections until they time out.
STAGGER = 8


def wait_idle(watchers: list[ImapWatcher], timeout: float) -> None:
    """Wait until every given threaded watcher has issued IDLE once."""
    deadline = time.monotonic() + timeout
    while any(w.idles < 1 for w in watchers) and time.monotonic() < deadline:
        time.sleep(0.02)


def rss_mib() -> float:
    """This process's resident memory in MiB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def cpu_seconds() -> float:
    """This process's user + system CPU seconds."""
    times = os.times()
    return times.user + times.system


def main() -> None:
    """Run one mode and print its figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watches", type=int, default=200)
    parser.add_argument("--mode", choices=["mux", "threads"], default="mux")
    parser.add_argument("--quiet", type=float, default=30.0, help="seconds of CPU measured idle")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "MAILROOM_BENCH_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mailroom-idle-"))
    server = DovecotServer(work / "dovecot", extra_config=dovecot_limits(args.watches + 50))
    for i in range(args.watches):
        server.add_user(f"u{i}", PASSWORD)
    server.start()
    report: dict[str, object] = {"mode": args.mode, "watches": args.watches}
    try:
        with database(args.database_url) as url:
            key = generate_key()
            os.environ["MAILROOM_MASTER_KEY"] = key
            settings = Settings(
                master_key=key,
                allowed_private_hosts="127.0.0.1",
                data_dir=work / "data",
                database_url=url,
            )
            store = open_store(url, work / "data", migrate=False)
            accounts = add_accounts(store, settings, server, args.watches)
            gc.collect()
            threads_before = threading.active_count()
            rss_before = rss_mib()
            started = time.monotonic()
            mux = IdleMux() if args.mode == "mux" else None
            watchers: list[ImapWatcher] = []
            runners: list[threading.Thread] = []
            for account in accounts:
                if mux is not None:
                    watcher: ImapWatcher = MuxWatcher(store, account, settings=settings, mux=mux)
                    watcher.start(lambda _failure: None)  # type: ignore[attr-defined]
                else:
                    watcher = ImapWatcher(store, account, settings=settings)
                    runner = threading.Thread(target=watcher.run, daemon=True)
                    runner.start()
                    runners.append(runner)
                    if len(runners) % STAGGER == 0:  # see STAGGER
                        wait_idle(watchers[-STAGGER + 1 :] + [watcher], args.timeout)
                watchers.append(watcher)
            while count_idling(server.pid) < args.watches:
                if time.monotonic() - started > args.timeout:
                    raise SystemExit(f"only {count_idling(server.pid)} watches reached IDLE")
                time.sleep(0.5)
            report["all_idle_after_seconds"] = round(time.monotonic() - started, 1)
            time.sleep(2)
            gc.collect()
            rss_after = rss_mib()
            report["rss_before_mib"] = round(rss_before, 1)
            report["rss_watching_mib"] = round(rss_after, 1)
            report["rss_per_watch_kib"] = round((rss_after - rss_before) * 1024 / args.watches, 1)
            report["threads"] = threading.active_count() - threads_before
            cpu = cpu_seconds()
            time.sleep(args.quiet)
            report["cpu_percent_quiet"] = round(100 * (cpu_seconds() - cpu) / args.quiet, 2)
            stopping = time.monotonic()
            for watcher in watchers:
                watcher.stop()
            for runner in runners:
                runner.join(timeout=30)
            while any(w.running.is_set() for w in watchers):
                time.sleep(0.05)
            report["stop_all_seconds"] = round(time.monotonic() - stopping, 1)
            if mux is not None:
                mux.close()
            store.dispose()
    finally:
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
