"""Scale harness: N IMAP accounts, M supervisors and K workers on PostgreSQL + Redis.

    python bench/scale.py --users 1000 --supervisors 2 --workers 2 --rate 1 --duration 120
    python bench/scale.py --users 1000 --kill-one-supervisor --duration 150

Everything runs on loopback and stops by itself: a private Dovecot (generated
users and Maildirs, process and client limits raised for the connections), a
fresh PostgreSQL database on the server of ``--database-url`` (dropped at the
end), a namespace of its own in Redis, and ``mailroom supervisor`` /
``mailroom worker`` child processes. Once every account is watched, mail is
APPENDed to random accounts at ``--rate`` messages a second for ``--duration``
seconds; each message's latency is its ``created_at`` in the store minus the
moment its APPEND was acknowledged. Printed at the end: per-process RSS (peak)
and CPU (share of one core over the load), Dovecot's RSS, new-mail latency
p50/p95/p99/max, queue depths (peak), lease handovers, and mail lost or stored
twice.

``--kill-one-supervisor`` kills (-9) the supervisor holding the most accounts a
third into the load: the survivors must take its accounts over once its leases
expire (within the lease TTL of its last renewal, plus their 3 s retry), and no
mail appended meanwhile may be lost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import redis
from imapclient import IMAPClient
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.factories import make_message  # noqa: E402
from tests.support.dovecot import DovecotServer  # noqa: E402

from mailroom.config import Settings  # noqa: E402
from mailroom.jobs.queues import make_queues  # noqa: E402
from mailroom.providers.imap import add_imap_account  # noqa: E402
from mailroom.secrets import generate_key  # noqa: E402
from mailroom.store import open_store  # noqa: E402
from mailroom.store.engine import Store  # noqa: E402
from mailroom.store.models import Message  # noqa: E402

PASSWORD = "scale-pw"
WATCH_LINE = re.compile(
    r"^(\S+ \S+) INFO mailroom\.jobs\.supervisor: (Watching|Stopped watching) account (\d+)\."
)
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def dovecot_limits(connections: int) -> str:
    """Dovecot settings for ``connections`` concurrent IMAP sessions (one process each).

    The defaults allow 100 processes a service and 1000 clients; every session is an
    ``imap`` process, and the login, auth and anvil services see each one pass.
    Mail APPENDed by another session reaches IDLE clients through inotify; the
    1-second check is the fallback the tests use too. ``verbose_proctitle`` shows a
    session's state in its process title, which is how the harness counts IDLEs.
    """
    processes = connections + 200
    return f"""
default_process_limit = {processes}
default_client_limit = {processes * 2}
default_vsz_limit = 0
mailbox_idle_check_interval = 1 secs
verbose_proctitle = yes
service imap {{
  process_limit = {processes}
}}
"""


# -- processes and their figures ---------------------------------------------------


@dataclass
class Proc:
    """A child process and what was sampled of it."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    rss_peak: int = 0
    cpu_start: float | None = None
    cpu_end: float | None = None
    killed_at: float | None = None

    def cpu(self) -> float | None:
        """User + system CPU seconds so far (None once gone)."""
        try:
            fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICK

    def rss(self) -> int:
        """Resident memory in bytes (0 once gone)."""
        try:
            pages = int(Path(f"/proc/{self.popen.pid}/statm").read_text().split()[1])
        except OSError:
            return 0
        return pages * PAGE


def group_rss(pgid: int) -> tuple[int, int]:
    """(Resident bytes, process count) of every process in a process group."""
    total, count = 0, 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with suppress(OSError, ValueError, IndexError):
            fields = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            total += int(Path("/proc", entry, "statm").read_text().split()[1]) * PAGE
            count += 1
    return total, count


@dataclass
class Samples:
    """Peaks seen by the sampler thread."""

    queue_peak: dict[str, int] = field(default_factory=dict)
    dovecot_rss_peak: int = 0
    dovecot_processes: int = 0


def sample(
    procs: list[Proc], queues: dict[str, object], dovecot_pgid: int | None, samples: Samples
) -> None:
    """One round of sampling: RSS peaks, queue depths, Dovecot's memory."""
    for proc in procs:
        proc.rss_peak = max(proc.rss_peak, proc.rss())
    for name, queue in queues.items():
        with suppress(redis.RedisError):
            depth = int(queue.pending_count())  # type: ignore[attr-defined]
            samples.queue_peak[name] = max(samples.queue_peak.get(name, 0), depth)
    if dovecot_pgid is not None:
        rss, count = group_rss(dovecot_pgid)
        samples.dovecot_rss_peak = max(samples.dovecot_rss_peak, rss)
        samples.dovecot_processes = max(samples.dovecot_processes, count)


# -- the watch log --------------------------------------------------------------------


def watch_events(path: Path) -> list[tuple[datetime, bool, int]]:
    """(time, started?, account) for every watch start and stop a supervisor logged."""
    events = []
    with suppress(OSError):
        for line in path.read_text(errors="replace").splitlines():
            if match := WATCH_LINE.match(line):
                stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
                events.append((stamp, match.group(2) == "Watching", int(match.group(3))))
    return events


def watching(path: Path) -> set[int]:
    """Accounts a supervisor's log says it watches now."""
    current: set[int] = set()
    for _stamp, started, account in watch_events(path):
        (current.add if started else current.discard)(account)
    return current


def handovers(logs: list[Path]) -> int:
    """How often an account's watch started in another process than its last one."""
    starts = sorted(
        (stamp, account, index)
        for index, path in enumerate(logs)
        for stamp, started, account in watch_events(path)
        if started
    )
    holder: dict[int, int] = {}
    moved = 0
    for _stamp, account, index in starts:
        if account in holder and holder[account] != index:
            moved += 1
        holder[account] = index
    return moved


# -- setting up -----------------------------------------------------------------------


@contextmanager
def database(admin_url: str) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database, dropped afterwards."""
    admin = create_engine(make_url(admin_url), isolation_level="AUTOCOMMIT")
    name = f"mailroom_scale_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        open_store(url).dispose()
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def add_accounts(store: Store, settings: Settings, server: DovecotServer, users: int) -> list[int]:
    """One mailroom user and IMAP account per Dovecot user."""
    return [
        add_imap_account(
            store,
            settings,
            name="imap",
            host=server.host,
            port=server.port,
            tls="none",
            login=f"u{i}",
            password=PASSWORD,
            owner=f"owner{i}",
        )
        for i in range(users)
    ]


def count_idling(pgid: int | None) -> int:
    """Dovecot sessions in IDLE right now (their process title says so)."""
    if pgid is None:
        return 0
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with suppress(OSError, ValueError, IndexError):
            fields = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and b" IDLE]" in Path("/proc", entry, "cmdline").read_bytes():
                count += 1
    return count


# -- the load ---------------------------------------------------------------------------


@dataclass
class Load:
    """Messages appended: Message-ID → (user, wall time the APPEND was acknowledged)."""

    sent: dict[str, tuple[int, float]] = field(default_factory=dict)
    failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def append_mail(
    server: DovecotServer, users: int, rate: float, duration: float, load: Load, seed: int
) -> None:
    """APPEND ``rate`` messages a second for ``duration`` seconds, each to a random user."""
    rng = random.Random(seed)
    total = int(rate * duration)
    start = time.monotonic()
    for n in range(total):
        delay = start + n / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        user = rng.randrange(users)
        mid = f"scale{n}-{uuid.uuid4().hex[:8]}@bench"
        try:
            client = IMAPClient(server.host, port=server.port, ssl=False, timeout=30)
            try:
                client.login(f"u{user}", PASSWORD)
                client.append("INBOX", make_message(mid, subject=f"Scale {n}"))
                acked = time.time()
            finally:
                with suppress(Exception):
                    client.logout()
        except Exception as exc:  # noqa: BLE001 - counted, the load goes on
            print(f"append {n} failed: {exc}", file=sys.stderr)
            with load.lock:
                load.failures += 1
            continue
        with load.lock:
            load.sent[mid] = (user, acked)


def arrivals(store: Store) -> dict[str, list[float]]:
    """Message-ID → the store's created_at (epoch seconds) of every copy of the load's mail."""
    with store.session() as session:
        rows = session.execute(
            select(Message.message_id_header, Message.created_at).where(
                Message.message_id_header.like("scale%@bench")
            )
        ).all()
    found: dict[str, list[float]] = {}
    for mid, created in rows:
        found.setdefault(mid, []).append(created.timestamp())
    return found


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, int(round(share * len(ordered) + 0.4999)))
    return ordered[min(rank, len(ordered)) - 1]


# -- the run ------------------------------------------------------------------------------


def launch(name: str, args: list[str], env: dict[str, str], logs: Path) -> Proc:
    """Start a ``mailroom`` child process logging to ``logs/name.log``."""
    log = logs / f"{name}.log"
    with log.open("wb") as sink:
        popen = subprocess.Popen(
            [sys.executable, "-m", "mailroom", "-v", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    return Proc(name, popen, log)


def stop_all(procs: list[Proc]) -> None:
    """SIGTERM every child still running, then SIGKILL what did not end in 60 s."""
    for proc in procs:
        if proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    for proc in procs:
        with suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait()


def run(args: argparse.Namespace, work: Path) -> dict[str, object]:
    """Set everything up, load it, measure, tear it down; returns the figures."""
    report: dict[str, object] = {"users": args.users, "rate": args.rate}
    t0 = time.monotonic()
    server = DovecotServer(work / "dovecot", extra_config=dovecot_limits(args.users + 100))
    for i in range(args.users):
        server.add_user(f"u{i}", PASSWORD)
    server.start()
    procs: list[Proc] = []
    try:
        with database(args.database_url) as url:
            key = generate_key()
            namespace = f"scale{uuid.uuid4().hex[:8]}"
            settings = Settings(
                master_key=key,
                allowed_private_hosts="127.0.0.1",
                data_dir=work / "data",
                database_url=url,
                redis_url=args.redis_url,
                namespace=namespace,
            )
            store = open_store(url, work / "data", migrate=False)
            accounts = add_accounts(store, settings, server, args.users)
            report["setup_seconds"] = round(time.monotonic() - t0, 1)
            env = {
                **os.environ,
                "MAILROOM_DATABASE_URL": url,
                "MAILROOM_REDIS_URL": args.redis_url,
                "MAILROOM_NAMESPACE": namespace,
                "MAILROOM_WATCH_LEASE_TTL": str(args.lease_ttl),
                "MAILROOM_MASTER_KEY": key,
                "MAILROOM_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
                "MAILROOM_DATA_DIR": str(work / "data"),
            }
            logs = work / "logs"
            logs.mkdir()
            poll = ["--poll-interval", str(args.poll_interval)]
            supervisors = [
                launch(f"supervisor{i}", ["supervisor", *poll], env, logs)
                for i in range(args.supervisors)
            ]
            workers = [
                launch(f"worker{i}", ["worker", "--queues", "all"], env, logs)
                for i in range(args.workers)
            ]
            procs = [*supervisors, *workers]
            queues = dict(make_queues(settings))
            samples = Samples()
            stop_sampling = threading.Event()

            def sampler() -> None:
                while not stop_sampling.is_set():
                    sample(procs, queues, server.pid, samples)
                    stop_sampling.wait(2.0)

            threading.Thread(target=sampler, daemon=True).start()

            started = time.monotonic()
            deadline = started + args.warmup_timeout
            while count_idling(server.pid) < args.users:
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"only {count_idling(server.pid)} of {args.users} accounts were in IDLE "
                        f"after {args.warmup_timeout:.0f} s"
                    )
                if any(p.popen.poll() is not None for p in procs):
                    raise SystemExit("a mailroom process ended during the warm-up; see its log")
                time.sleep(1.0)
            report["all_watched_after_seconds"] = round(time.monotonic() - started, 1)
            time.sleep(args.settle)
            for proc in procs:
                proc.cpu_start = proc.cpu()
                proc.rss_peak = proc.rss()
            samples.queue_peak.clear()

            load = Load()
            appender = threading.Thread(
                target=append_mail,
                args=(server, args.users, args.rate, args.duration, load, args.seed),
                daemon=True,
            )
            load_start = time.monotonic()
            appender.start()
            victim: Proc | None = None
            if args.kill_one_supervisor and len(supervisors) > 1:
                time.sleep(args.duration / 3)
                victim = max(supervisors, key=lambda p: len(watching(p.log)))
                victim.cpu_end = victim.cpu()
                victim.popen.send_signal(signal.SIGKILL)
                victim.popen.wait()
                victim.killed_at = time.time()
            appender.join()
            load_seconds = time.monotonic() - load_start
            for proc in procs:
                if proc.killed_at is None:
                    proc.cpu_end = proc.cpu()
            drain_until = time.monotonic() + args.drain
            while time.monotonic() < drain_until:
                if set(arrivals(store)) >= set(load.sent):
                    break
                time.sleep(1.0)
            stop_sampling.set()
            found = arrivals(store)
            report.update(figures(load, found, load_seconds))
            if victim is not None and victim.killed_at is not None:
                killed = datetime.fromtimestamp(victim.killed_at)
                report["lease_ttl"] = args.lease_ttl
                report.update(takeover(victim, supervisors, killed))
                report.update(kill_figures(load, found, victim, accounts))
            report["handovers"] = handovers([p.log for p in supervisors])
            report["processes"] = {
                p.name: {
                    "rss_peak_mib": round(p.rss_peak / 2**20, 1),
                    "cpu_percent": (
                        round(100 * (p.cpu_end - p.cpu_start) / load_seconds, 1)
                        if p.cpu_end is not None and p.cpu_start is not None
                        else None
                    ),
                }
                for p in procs
            }
            report["dovecot"] = {
                "rss_peak_mib": round(samples.dovecot_rss_peak / 2**20, 1),
                "processes": samples.dovecot_processes,
            }
            report["queue_peak"] = samples.queue_peak
            stop_all(procs)
            store.dispose()
    finally:
        stop_all(procs)
        server.cleanup()
    return report


def takeover(victim: Proc, supervisors: list[Proc], killed: datetime) -> dict[str, object]:
    """When the survivors' logs show every account the killed supervisor held watched again."""
    held = watching(victim.log)
    first_start: dict[int, datetime] = {}
    for proc in supervisors:
        if proc is victim:
            continue
        for stamp, started, account in watch_events(proc.log):
            if started and account in held and stamp >= killed:
                first_start[account] = min(stamp, first_start.get(account, stamp))
    moved = len(first_start)
    last = max(first_start.values(), default=None)
    return {
        "killed_held_accounts": len(held),
        "moved_accounts": moved,
        "takeover_seconds": (
            round((last - killed).total_seconds(), 1) if last and moved == len(held) else None
        ),
    }


def latencies(
    load: Load, found: dict[str, list[float]], users: set[int] | None = None
) -> list[float]:
    """Seconds from APPEND to the first stored copy (of mail to ``users`` only, if given)."""
    return [
        max(0.0, min(found[mid]) - acked)
        for mid, (user, acked) in load.sent.items()
        if mid in found and (users is None or user in users)
    ]


def summary(values: list[float]) -> dict[str, int]:
    """p50/p95/p99/max in milliseconds."""
    return {
        "p50": round(1000 * statistics.median(values)),
        "p95": round(1000 * percentile(values, 0.95)),
        "p99": round(1000 * percentile(values, 0.99)),
        "max": round(1000 * max(values)),
    }


def kill_figures(
    load: Load, found: dict[str, list[float]], victim: Proc, accounts: list[int]
) -> dict[str, object]:
    """Latency of mail to the accounts the killed supervisor held, and to the others."""
    held = watching(victim.log)
    others = {user for user, account in enumerate(accounts) if account not in held}
    result: dict[str, object] = {}
    spared = latencies(load, found, others)
    if spared:
        result["latency_ms_accounts_not_killed"] = summary(spared)
    orphaned = latencies(load, found, set(range(len(accounts))) - others)
    if orphaned:
        result["latency_ms_accounts_killed"] = summary(orphaned)
    return result


def figures(load: Load, found: dict[str, list[float]], seconds: float) -> dict[str, object]:
    """Latency percentiles, lost and doubled mail."""
    values = latencies(load, found)
    result: dict[str, object] = {
        "appended": len(load.sent),
        "append_failures": load.failures,
        "load_seconds": round(seconds, 1),
        "arrived": len(values),
        "lost": len(set(load.sent) - set(found)),
        "stored_twice": sum(1 for copies in found.values() if len(copies) > 1),
    }
    if values:
        result["latency_ms"] = summary(values)
    return result


def main() -> None:
    """Parse the options, run, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100, help="IMAP accounts (one user each)")
    parser.add_argument("--supervisors", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=1.0, help="new messages a second, overall")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of load")
    parser.add_argument("--lease-ttl", type=float, default=90.0)
    parser.add_argument("--poll-interval", type=float, default=300.0)
    parser.add_argument("--kill-one-supervisor", action="store_true")
    parser.add_argument("--warmup-timeout", type=float, default=600.0)
    parser.add_argument(
        "--settle", type=float, default=10.0, help="seconds between warm-up and load"
    )
    parser.add_argument("--drain", type=float, default=60.0, help="longest wait for the last mail")
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "MAILROOM_BENCH_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
        help="a PostgreSQL server to create (and drop) a scratch database on",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="copy the processes' logs here")
    args = parser.parse_args()
    if args.kill_one_supervisor:
        args.drain = max(args.drain, args.lease_ttl * 2)
    work = Path(tempfile.mkdtemp(prefix="mailroom-scale-"))
    try:
        report = run(args, work)
    finally:
        if args.keep is not None and (work / "logs").is_dir():
            shutil.copytree(work / "logs", args.keep, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
