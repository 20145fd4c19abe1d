"""Sealed mail against clear mail, same run, same corpus: ingest, JMAP inbox, search, size.

    python bench/sealed.py [--maildir DIR] [--runs 3] [--rounds 300] [--notmuch]
                           [--postgresql postgresql+psycopg://USER@HOST/DB]

For each run and each mode (``clear``: no sealing; ``sealed``: a master key and
``MAILROOM_ENCRYPT_MAIL`` on, i.e. ``MailSealing(seal_new_mail=True)``), the modes
alternating, the Maildir (default ``bench/.work/corpus-x1``, made by
``python bench/corpus.py bench/.work/corpus-x1``: 6,046 messages) is imported into
a fresh SQLite store in a child process (``import_path``, as ``bench/ingest.py``).
Then, in this process, on that store:

* JMAP inbox: one request of Email/query (Inbox, newest first, collapseThreads,
  limit 50) + Email/get of the 50, through ``Dispatcher.run`` (database and JMAP
  work, as ``bench/jmap_query.py``'s in-process figure);
* search: the same request with ``{"text": WORD}`` instead of the Inbox, WORD
  taken in turn from ``WORDS`` (whole words, which both modes match alike);
* size: the SQLite file after a WAL checkpoint, and the pages of the search
  index (``message_search*``: clear words, or the blind index's token words for
  sealed mail), from ``dbstat``.

Prints each run and the median of the runs per mode, then one JSON line. With
``--notmuch``, ``notmuch new`` on the same Maildir (``bench/ingest.py``'s
``run_notmuch``) in each run right after the two modes, for the 2x target (the
machine's load moves; within a run all three see about the same). With
``--postgresql URL``, after the SQLite runs, the ingest alone (both modes, same
number of runs) into a fresh database made next to URL's and dropped after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work"
sys.path.insert(0, str(ROOT / "bench"))

from jmap_query import NEWEST_FIRST  # noqa: E402  (bench/jmap_query.py)
from jmap_query import request as jmap_request  # noqa: E402

from ingest import run_notmuch  # noqa: E402  (bench/ingest.py)

WORDS = ["linux", "money", "python", "conference", "razor", "perl", "mortgage", "kernel"]
MODES = ("clear", "sealed")

# The child: import the Maildir into a fresh store, sealing or not; seconds and count.
IMPORT = """
import json, os, sys, time
from pathlib import Path
from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.sealing import MailSealing
from mailroom.providers.local import import_path
from mailroom.store import open_store
store = open_store(sys.argv[2])
if sys.argv[3] == "sealed":
    store.sealing = MailSealing(MasterKeyWrapper(bytes.fromhex(sys.argv[4])), seal_new_mail=True)
start = time.perf_counter()
summary = import_path(store, Path(sys.argv[1]), owner="me", account="bench")
seconds = time.perf_counter() - start
store.dispose()
print(json.dumps({"seconds": seconds, "messages": summary.imported}))
"""


def import_into(maildir: Path, db: Path, mode: str, key: bytes) -> dict[str, float]:
    """Import in a child process (its own interpreter, as a real import)."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORT, str(maildir), f"sqlite:///{db}", mode, key.hex()],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"the {mode} import failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def postgresql_ingest(maildir: Path, url: str, mode: str, key: bytes) -> dict[str, float]:
    """The import into a fresh PostgreSQL database (created and dropped through ``url``'s)."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    name = f"mailroom_sealed_bench_{os.getpid()}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        fresh = make_url(url).set(database=name).render_as_string(hide_password=False)
        done = subprocess.run(
            [sys.executable, "-c", IMPORT, str(maildir), fresh, mode, key.hex()],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"the {mode} PostgreSQL import failed:\n{done.stderr}")
        result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        return result
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        admin.dispose()


def percentiles(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    cut = statistics.quantiles(samples, n=100)
    return {"p50": statistics.median(samples), "p95": cut[94], "max": samples[-1]}


def page_request(account: str, condition: dict[str, Any]) -> dict[str, Any]:
    """Email/query (newest first, collapsed, 50, with the total) + Email/get of its ids."""
    return jmap_request(account, "", True, (condition, NEWEST_FIRST))


def latencies(db: Path, mode: str, key: bytes, rounds: int) -> dict[str, Any]:
    """Inbox and search p95 on the store, in-process; the totals each word found."""
    from mailroom.crypto import MasterKeyWrapper
    from mailroom.crypto.sealing import MailSealing
    from mailroom.jmap.auth import Principal
    from mailroom.jmap.dispatcher import Dispatcher, Limits
    from mailroom.jmap.methods import METHODS
    from mailroom.jmap.session import CAPABILITIES, session_state
    from mailroom.labels.resolver import system_label
    from mailroom.owners import get_user
    from mailroom.store import open_store

    store = open_store(f"sqlite:///{db}")
    if mode == "sealed":  # the key the child sealed with, as `mailroom serve` would have it
        store.sealing = MailSealing(MasterKeyWrapper(key), seal_new_mail=True)
    dispatcher = Dispatcher(store, METHODS, CAPABILITIES, Limits(), session_state)
    with store.session() as session:
        user = get_user(session, "me")
        inbox = f"L{system_label(session, user.id, 'inbox').id}"
        principal = Principal(user.id, user.name)
    account = f"u{principal.user_id}"

    def timed(condition: dict[str, Any], count: int) -> tuple[list[float], int]:
        document = dispatcher.parse(json.dumps(page_request(account, condition)).encode())
        answer = dispatcher.run(principal, document)
        responses = answer["methodResponses"]
        assert responses[0][0] == "Email/query", responses[0]
        total = int(responses[0][1]["total"])
        samples = []
        for _ in range(count):
            start = time.perf_counter()
            dispatcher.run(principal, document)
            samples.append((time.perf_counter() - start) * 1000)
        return samples, total

    timed({"inMailbox": inbox}, 20)  # warm-up
    inbox_samples, _ = timed({"inMailbox": inbox}, rounds)
    search_samples: list[float] = []
    totals: dict[str, int] = {}
    for word in WORDS:
        samples, totals[word] = timed({"text": word}, max(10, rounds // len(WORDS)))
        search_samples.extend(samples)
    store.dispose()
    return {
        "inbox": percentiles(inbox_samples),
        "search": percentiles(search_samples),
        "totals": totals,
    }


def sizes(db: Path) -> dict[str, float]:
    """The file's size and the search index's, in MiB (after a checkpoint)."""
    import sqlite3

    connection = sqlite3.connect(db)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rows = connection.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    # Token words of the blind index (crypto.blind_index), counted through FTS5's vocabulary.
    connection.execute(
        "CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, message_search, 'instance')"
    )
    tokens = connection.execute(
        "SELECT count(*) FROM temp.vocab WHERE term >= char(57344) AND term < char(57345)"
    ).fetchone()[0]
    connection.close()
    index = sum(size for name, size in rows if name.startswith("message_search"))
    return {
        "file_mib": db.stat().st_size / 2**20,
        "search_index_mib": index / 2**20,
        "token_words": tokens,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--maildir", type=Path, default=WORK / "corpus-x1")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--notmuch", action="store_true", help="also time `notmuch new`")
    parser.add_argument("--postgresql", metavar="URL", help="also time the ingest on PostgreSQL")
    args = parser.parse_args()
    if not args.maildir.is_dir():
        raise SystemExit(f"{args.maildir} is missing; python bench/corpus.py {args.maildir}")

    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    notmuch: list[dict[str, float]] = []
    load_before = os.getloadavg()[0]
    for run in range(1, args.runs + 1):
        for mode in MODES if run % 2 else tuple(reversed(MODES)):
            with tempfile.TemporaryDirectory(prefix=f"mailroom-{mode}-") as work:
                db = Path(work) / "bench.sqlite3"
                key = os.urandom(32)
                imported = import_into(args.maildir, db, mode, key)
                row: dict[str, Any] = {
                    "msg_per_s": imported["messages"] / imported["seconds"],
                    "messages": imported["messages"],
                    "seconds": imported["seconds"],
                    **sizes(db),
                }
                row.update(latencies(db, mode, key, args.rounds))
                results[mode].append(row)
                print(
                    f"run {run} {mode:>6}: {row['messages']:.0f} msgs in {row['seconds']:.1f} s "
                    f"= {row['msg_per_s']:,.0f} msg/s; inbox p95 {row['inbox']['p95']:.2f} ms; "
                    f"search p95 {row['search']['p95']:.2f} ms; file {row['file_mib']:.1f} MiB "
                    f"(search index {row['search_index_mib']:.1f} MiB, "
                    f"{row['token_words']:,} token words); totals {row['totals']}",
                    file=sys.stderr,
                )
        if args.notmuch:  # in the same run, right after the two modes: the same load
            notmuch.append(run_notmuch(args.maildir))
            print(f"run {run} notmuch new: {notmuch[-1]}", file=sys.stderr)
    postgresql: dict[str, list[float]] = {mode: [] for mode in MODES}
    if args.postgresql:
        for run in range(1, args.runs + 1):
            for mode in MODES if run % 2 else tuple(reversed(MODES)):
                done = postgresql_ingest(args.maildir, args.postgresql, mode, os.urandom(32))
                postgresql[mode].append(done["messages"] / done["seconds"])
                print(
                    f"run {run} {mode:>6} PostgreSQL: {postgresql[mode][-1]:,.0f} msg/s",
                    file=sys.stderr,
                )

    def median(mode: str, *path: str) -> float:
        values = []
        for row in results[mode]:
            value: Any = row
            for part in path:
                value = value[part]
            values.append(float(value))
        return statistics.median(values)

    summary: dict[str, Any] = {
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, "
        f"Python {platform.python_version()}",
        "load": (round(load_before, 2), round(os.getloadavg()[0], 2)),
    }
    print(f"{'median of ' + str(args.runs):<16}{'clear':>12}{'sealed':>12}")
    for label, path in (
        ("ingest msg/s", ("msg_per_s",)),
        ("inbox p95 ms", ("inbox", "p95")),
        ("search p95 ms", ("search", "p95")),
        ("search p50 ms", ("search", "p50")),
        ("file MiB", ("file_mib",)),
        ("index MiB", ("search_index_mib",)),
    ):
        clear, sealed = median("clear", *path), median("sealed", *path)
        summary[label] = {"clear": clear, "sealed": sealed}
        print(f"{label:<16}{clear:>12.2f}{sealed:>12.2f}")
    if args.postgresql:
        clear, sealed = (statistics.median(postgresql[mode]) for mode in MODES)
        summary["postgresql ingest msg/s"] = {"clear": clear, "sealed": sealed}
        print(f"{'PostgreSQL msg/s':<16}{clear:>12.2f}{sealed:>12.2f}")
    if notmuch:
        rate = statistics.median(n["messages"] / n["seconds"] for n in notmuch)
        summary["notmuch msg/s"] = rate
        print(f"notmuch new msg/s (median): {rate:.0f}")
        # Each run's modes against its own `notmuch new`: a machine whose speed drifts
        # between runs moves both sides of a pair alike.
        for mode in MODES:
            paired = [
                row["msg_per_s"] / (n["messages"] / n["seconds"])
                for row, n in zip(results[mode], notmuch, strict=True)
            ]
            summary[f"{mode} against notmuch, per run"] = paired
            shown = ", ".join(f"{x:.2f}" for x in paired)
            middle = statistics.median(paired)
            print(f"{mode} against notmuch per run: {shown} (median {middle:.2f}x)")
    summary["runs"] = results
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
