"""Gmail import benchmark: a 20,000-message account under a 6,000-units/minute quota.

    python bench/gmail_import.py [--messages 20000] [--quota 6000] [--scale 30]
                                 [--database-url URL] [--redis] [--repeat N]

Issue 16's figure: the full import of an emulated Gmail account whose project has
the new-project profile (6,000 units per user and minute; ``messages.get`` raw
costs 60) must see no rejection after the limit is learned and take no more than
10 % over the quota's theoretical minimum.

At 60 units a message, 20,000 messages are 1.2 million units: 200 minutes of
quota. So the emulator's quota meter and mailroom's pacer read one clock that
runs ``--scale`` times faster than real time (:func:`scaled_time`, injected into
the importer; the pacer sleeps on it, the emulator's sliding minute is counted on
it, the backfill's deferrals wait on it). Nothing is patched: the importer,
intake, pacer and HTTP client are the ones a worker runs, and the quota
arithmetic is the real one. Times below are on that clock ("quota minutes");
real seconds are printed too. The scale must leave the real work (HTTP, parsing,
storing) time to keep up: each request of 5 messages must be fetched and stored
in less than ``60 / (85 × scale / 5)`` real seconds (118 ms at the default 30x), or the
import is slower than the quota and the figure measures the machine.

The importer runs as the import job does: page after page; a quota rejection
defers the backfill to the end of the account's minute (the job would be
re-queued for then), which the loop here waits out on the scaled clock.

Printed per run (JSON): messages stored, units charged, rejections (the learning
ones, and any after the limit was learned), the peak units charged in any
sliding minute (overall, and after the first rejection), the wall time in
quota minutes and real seconds, and the two minimums:

* ``quota_minimum``: the units at the full limit, ``(units / limit − 1)`` minutes
  (a sliding minute can hold ``limit`` units, so the first minute's worth needs no
  wait);
* ``paced_minimum``: what SPEC §1's pacer can do at best: the units spent until
  the first rejection, the minute that rejection blocks, then the rest at 85 % of
  the learned limit, ``(rest / (0.85 × limit) − 1)`` minutes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.provider_bench import repeat_runs, store_count  # noqa: E402
from tests.emulators.gmail.emulator import GmailEmulator  # noqa: E402
from tests.emulators.gmail.quota import NEW_PROJECT  # noqa: E402
from tests.emulators.gmail.seed import START, epoch_ms, make_message  # noqa: E402
from tests.emulators.gmail.service import LoggedRequest  # noqa: E402
from tests.providers.test_gmail_contract import add_gmail_account  # noqa: E402

from mailroom.config import Settings  # noqa: E402
from mailroom.providers.base import RateLimitError  # noqa: E402
from mailroom.providers.gmail.backfill import load_backfill  # noqa: E402
from mailroom.providers.gmail.importer import GmailImporter  # noqa: E402
from mailroom.providers.gmail.quota import PACE_SHARE, TimeSource, scaled_time  # noqa: E402
from mailroom.secrets import generate_key  # noqa: E402
from mailroom.store import open_store  # noqa: E402
from mailroom.store.engine import Store  # noqa: E402

REJECTED = (403, 429)


def seed(gmail: GmailEmulator, count: int) -> None:
    """``count`` messages: a fifth in the Inbox, the rest archived, some labelled,
    1 in 50 spam and 1 in 50 trash; threads of three; the four tab categories."""
    work = gmail.create_label("Work")
    receipts = gmail.create_label("Receipts")
    categories = ["CATEGORY_PERSONAL", "CATEGORY_UPDATES", "CATEGORY_PROMOTIONS", "CATEGORY_SOCIAL"]
    for number in range(count):
        when = START + timedelta(minutes=17 * number)
        root = number - number % 3
        replying = number % 3 != 0
        raw = make_message(
            f"Re: Topic {root}" if replying else f"Topic {root}",
            f"Message number {number}.\n" + "Some text of a usual length. " * 20,
            sender=f"person{number % 97}@example.org",
            to=gmail.address,
            message_id=f"<m{number}@example.org>",
            in_reply_to=f"<m{number - 1}@example.org>" if replying else None,
            when=when,
        )
        labels = [categories[number % len(categories)]]
        if number % 50 == 7:
            labels = ["SPAM"]
        elif number % 50 == 8:
            labels = ["TRASH"]
        elif number % 5 == 0:
            labels += ["INBOX", "UNREAD"]
        elif number % 11 == 0:
            labels.append(work if number % 2 else receipts)
        gmail.add_message(raw, labels, internal_date=epoch_ms(when))


def peak_minute(log: list[LoggedRequest]) -> int:
    """The most units charged in any sliding 60 s of the quota clock."""
    charged = [(entry.at, entry.units) for entry in log if entry.units]
    peak = total = 0
    start = 0
    for at, units in charged:
        total += units
        while charged[start][0] <= at - 60.0:
            total -= charged[start][1]
            start += 1
        peak = max(peak, total)
    return peak


def rejections(log: list[LoggedRequest]) -> tuple[int, int]:
    """(rejections in the request that taught the limit, rejections after it).

    The log holds a batch's own entry before its parts, so the first rejected
    part's batch ends at the next entry made outside a batch.
    """
    first = next((i for i, e in enumerate(log) if e.status in REJECTED), None)
    if first is None:
        return 0, 0
    end = next((i for i in range(first, len(log)) if not log[i].in_batch), len(log))
    learning = sum(1 for e in log[first:end] if e.status in REJECTED)
    after = sum(1 for e in log[end:] if e.status in REJECTED)
    return learning, after


def run_import(store: Store, importer: GmailImporter, account_id: int, clock: TimeSource) -> int:
    """Import pages until the backfill ends, waiting out each deferral; the deferrals."""
    deferrals = 0
    while True:
        try:
            if importer.import_page(account_id):
                continue
        except RateLimitError as exc:
            deferrals += 1
            clock.sleep((exc.retry_after or 60.0) + 0.5)
            continue
        with store.session() as session:
            state = load_backfill(session, account_id)
        if state.done:
            return deferrals
        if state.not_before is not None:  # deferred by an earlier page: wait for it
            clock.sleep(max(0.0, (state.not_before - clock.clock()).total_seconds()) + 0.5)


def one_run(args: argparse.Namespace, database_url: str | None) -> dict[str, Any]:
    """Seed an emulator, import it into a fresh store, measure."""
    clock = scaled_time(args.scale)
    with tempfile.TemporaryDirectory(prefix="mailroom-gmail-bench-") as work:
        data = Path(work) / "data"
        settings = Settings(
            master_key=generate_key(),
            allowed_private_hosts="127.0.0.1",
            data_dir=data,
            database_url=database_url,
            redis_url=args.redis_url if args.redis else None,
            namespace=f"gmail-bench-{time.time_ns()}",
        )
        store = open_store(settings.resolved_database_url, data)
        gmail = GmailEmulator(
            "bench@example.com",
            profile=NEW_PROJECT,
            quota_clock=lambda: clock.clock().timestamp(),
        )
        gmail.set_quota_limit(args.quota)
        seed(gmail, args.messages)
        with gmail:
            account_id = add_gmail_account(store, settings, gmail, name="bench")
            importer = GmailImporter(store, settings, clock)
            gmail.clear_log()
            started, real_started = clock.clock(), time.monotonic()
            deferrals = run_import(store, importer, account_id, clock)
            wall = (clock.clock() - started).total_seconds()
            real = time.monotonic() - real_started
            log = gmail.requests
        stored = store_count(store, account_id)
        store.dispose()
    units = sum(entry.units for entry in log)
    learning, after = rejections(log)
    limit = args.quota
    budget = PACE_SHARE * limit
    first_rejected = next(e.at for e in log if e.status in REJECTED) if learning else None
    before_learning = sum(e.units for e in log if first_rejected is None or e.at < first_rejected)
    quota_minimum = max(0.0, units / limit - 1) * 60
    rest = units - before_learning
    paced_minimum = (60.0 if learning else 0.0) + max(0.0, rest / budget - 1) * 60
    return {
        "messages": args.messages,
        "stored": stored,
        "units": units,
        "gets": sum(1 for e in log if e.method == "messages.get" and e.units),
        "lists": sum(1 for e in log if e.method == "messages.list" and e.units),
        "learning_rejections": learning,
        "rejections_after_learning": after,
        "deferrals": deferrals,
        "peak_units_per_minute": peak_minute(log),
        "peak_after_learning": peak_minute(
            [e for e in log if first_rejected is None or e.at > first_rejected]
        ),
        "wall_quota_min": round(wall / 60, 2),
        "wall_real_s": round(real, 1),
        "quota_minimum_min": round(quota_minimum / 60, 2),
        "paced_minimum_min": round(paced_minimum / 60, 2),
        "over_quota_minimum": round(wall / quota_minimum - 1, 4) if quota_minimum else None,
        "over_paced_minimum": round(wall / paced_minimum - 1, 4) if paced_minimum else None,
        "scale": args.scale,
        "store": store_kind(database_url),
        "pacer": "redis" if args.redis else "store",
    }


def store_kind(url: str | None) -> str:
    """``sqlite`` or ``postgresql``."""
    return "postgresql" if url and url.startswith("postgresql") else "sqlite"


def main() -> None:
    """Run the benchmark ``--repeat`` times; print each run and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--quota", type=int, default=6_000, help="units per user and minute")
    parser.add_argument("--scale", type=float, default=30.0, help="clock speed-up")
    parser.add_argument("--database-url", help="PostgreSQL URL of a database to recreate")
    parser.add_argument("--redis", action="store_true", help="the pacer in Redis")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    repeat_runs(
        args, one_run, ("wall_quota_min", "wall_real_s", "over_quota_minimum", "over_paced_minimum")
    )


if __name__ == "__main__":
    main()
