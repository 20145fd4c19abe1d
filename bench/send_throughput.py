"""Sending throughput: the direct lane with one worker, next to Postfix relaying to the same sink.

    python bench/send_throughput.py [--messages 500] [--repeat 5] [--no-postfix]
                                    [--database-url URL] [--file-sent]

One aiosmtpd sink (its own process, so it takes no CPU from the sender being
measured) accepts every message and reports each one. Each run, in this order:

* **transport**: :class:`mailroom.outbound.smtp.SmtpTransport` alone hands the
  messages over one by one on its one kept connection — the ceiling of the lane;
* **lane**: the messages are queued for the ``direct`` lane of a local account
  whose outgoing server is the sink (``queue_message``, one transaction each, as
  the submission port and JMAP do), then one worker
  (:class:`mailroom.outbound.sender.Sender`, ``run_lane("direct")``) hands them
  over; timed from the first queueing until the sink holds the last message, with
  the hand-off alone reported too. ``--file-sent`` also runs the after-sent hook
  that files each Sent copy (``outbound.filing.file_sent``), as ``mailroom serve`` does.
  The CPU milliseconds per message of this process (queueing, hand-off) are printed
  too: on a loaded machine they say more than the rates;
* **postfix**: a private Postfix (Debian ``postfix``; its own config, queue and
  data directories under a temporary directory, ``postfix -c DIR start``, nothing
  of the system's configuration used) relays to the same sink; the messages are
  injected over one SMTP connection with smtplib, timed from the first injection
  until the sink holds the last message (Postfix's queue, fsyncs and its parallel
  delivery agents included).

Prints one row per run and the medians; needs root for Postfix (it drops to the
``postfix`` user itself).
"""

from __future__ import annotations

import argparse
import os
import shutil
import smtplib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SINK = """
import socket, sys
from aiosmtpd.controller import Controller

class Count:
    async def handle_DATA(self, server, session, envelope):
        sys.stdout.write("m\\n")
        sys.stdout.flush()
        return "250 2.0.0 Ok: queued"

with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
controller = Controller(Count(), hostname="127.0.0.1", port=port)
controller.start()
print(port, flush=True)
sys.stdin.read()  # until the bench closes our stdin
controller.stop()
"""


class Sink:
    """The counting aiosmtpd sink in a child process."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SINK],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        self.count = 0
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for _line in self.process.stdout:
            with self._changed:
                self.count += 1
                self._changed.notify_all()

    def wait_for(self, total: int, timeout: float = 600.0) -> None:
        """Block until the sink has accepted ``total`` messages in all."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.count >= total, timeout):
                raise SystemExit(f"the sink got {self.count} of {total} messages in {timeout} s")

    def close(self) -> None:
        """Stop the sink process."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()


def message(run: int, number: int) -> bytes:
    """A plain message of about 2 KB with its own Message-ID."""
    body = "".join(
        f"Line {n} of a message that says a little about sending.\r\n" for n in range(30)
    )
    return (
        f"From: Bench <bench@sender.example>\r\nTo: Reader <reader@receiver.example>\r\n"
        f"Subject: Throughput {run}/{number}\r\nDate: Mon, 1 Dec 2026 12:00:00 +0000\r\n"
        f"Message-ID: <bench-{run}-{number}-{os.getpid()}@sender.example>\r\n"
        f"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}"
    ).encode()


def bench_transport(sink: Sink, run: int, count: int) -> float:
    """Seconds for SmtpTransport alone to hand ``count`` messages over."""
    from mailroom.outbound.smtp import SmtpTransport
    from mailroom.outbound.smtp_settings import SmtpSettings

    expected = sink.count + count
    transport = SmtpTransport(
        SmtpSettings("127.0.0.1", sink.port, "none"), allowed_hosts=["127.0.0.1"]
    )
    start = time.perf_counter()
    try:
        for number in range(count):
            transport.send(
                "bench@sender.example",
                ["reader@receiver.example"],
                message(run, number),
                message_id=f"t{run}-{number}",
            )
        sink.wait_for(expected)
    finally:
        transport.close()
    return time.perf_counter() - start


def bench_lane(
    sink: Sink, run: int, count: int, database_url: str | None, file_sent: bool
) -> tuple[float, float, float, float]:
    """(queue + hand-off s, hand-off s, queue CPU s, hand-off CPU s) of the direct lane."""
    from mailroom.config import Settings
    from mailroom.outbound import hooks
    from mailroom.outbound.queueing import queue_message
    from mailroom.outbound.sender import Sender
    from mailroom.owners import get_or_create_user
    from mailroom.secrets import generate_key
    from mailroom.store.engine import open_store
    from mailroom.store.models import Account

    work = Path(tempfile.mkdtemp(prefix="mailroom-send-bench-"))
    url = database_url or f"sqlite:///{work / 'bench.sqlite3'}"
    store = open_store(url, work)
    settings = Settings(
        data_dir=work,
        database_url=url,
        master_key=generate_key(),
        allowed_private_hosts="127.0.0.1",
    )
    outgoing = {"host": "127.0.0.1", "port": sink.port, "security": "none", "login": None}
    with store.session() as session:
        user = get_or_create_user(session, f"bench{run}")
        account = Account(
            user_id=user.id,
            name=f"bench{run}",
            provider="local",
            settings={"path": str(work), "smtp": outgoing},
        )
        session.add(account)
        session.flush()
        account_id = account.id
    installed = None
    if file_sent:
        from mailroom.outbound.filing import file_sent as installed

        hooks.AFTER_SENT.append(installed)
    sender = Sender(store, settings)
    expected = sink.count + count
    try:
        start, cpu_start = time.perf_counter(), time.process_time()
        for number in range(count):
            with store.session() as session:
                queue_message(
                    session,
                    settings=settings,
                    account_id=account_id,
                    raw=message(run, number),
                    lane="direct",
                )
        queued, cpu_queued = time.perf_counter(), time.process_time()
        handed = 0
        while handed < count:
            went = sender.run_lane("direct")
            if went == 0:
                raise SystemExit(f"the direct lane stopped after {handed} of {count} messages")
            handed += went
        sink.wait_for(expected)
        done, cpu_done = time.perf_counter(), time.process_time()
    finally:
        sender.close()
        if installed is not None:
            hooks.AFTER_SENT.remove(installed)
        store.dispose()
        shutil.rmtree(work, ignore_errors=True)
    return done - start, done - queued, cpu_queued - cpu_start, cpu_done - cpu_queued


POSTFIX_MAIN = """\
compatibility_level = 3.6
queue_directory = {root}/queue
data_directory = {root}/data
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = bench.invalid
mydomain = bench.invalid
myorigin = bench.invalid
mydestination =
relayhost = [127.0.0.1]:{sink_port}
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
alias_maps =
alias_database =
local_recipient_maps =
maillog_file_prefixes = {root}
maillog_file = {root}/maillog
smtp_tls_security_level = none
smtpd_tls_security_level = none
biff = no
"""

# The stock Debian services, chroot off (the private queue has no /etc copies), and
# smtpd on a private port.
POSTFIX_SERVICES = [
    "127.0.0.1:{port} inet n - n - - smtpd",
    "pickup unix n - n 60 1 pickup",
    "cleanup unix n - n - 0 cleanup",
    "qmgr unix n - n 300 1 qmgr",
    "tlsmgr unix - - n 1000? 1 tlsmgr",
    "rewrite unix - - n - - trivial-rewrite",
    "bounce unix - - n - 0 bounce",
    "defer unix - - n - 0 bounce",
    "trace unix - - n - 0 bounce",
    "verify unix - - n - 1 verify",
    "flush unix n - n 1000? 0 flush",
    "proxymap unix - - n - - proxymap",
    "proxywrite unix - - n - 1 proxymap",
    "smtp unix - - n - - smtp",
    "relay unix - - n - - smtp",
    "showq unix n - n - - showq",
    "error unix - - n - - error",
    "retry unix - - n - - error",
    "discard unix - - n - - discard",
    "anvil unix - - n - 1 anvil",
    "scache unix - - n - 1 scache",
    "postlog unix-dgram n - n - 1 postlogd",
]


class Postfix:
    """A private Postfix instance relaying everything to the sink."""

    def __init__(self, sink_port: int) -> None:
        if shutil.which("postfix") is None:
            raise SystemExit("Postfix is not installed: apt-get install postfix (or --no-postfix)")
        self.root = Path(tempfile.mkdtemp(prefix="mailroom-postfix-bench-"))
        self.root.chmod(0o755)
        self.port = _free_port()
        conf = self.root / "conf"
        conf.mkdir()
        (self.root / "queue").mkdir()
        (self.root / "data").mkdir()
        shutil.chown(self.root / "data", "postfix")
        (conf / "main.cf").write_text(POSTFIX_MAIN.format(root=self.root, sink_port=sink_port))
        (conf / "master.cf").write_text(
            "\n".join(line.format(port=self.port) for line in POSTFIX_SERVICES) + "\n"
        )
        self._postfix("start")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with smtplib.SMTP("127.0.0.1", self.port, timeout=5) as probe:
                    probe.noop()
                return
            except OSError:
                time.sleep(0.1)
        raise SystemExit(f"Postfix did not start; see {self.root / 'maillog'}")

    def _postfix(self, command: str) -> None:
        done = subprocess.run(
            ["postfix", "-c", str(self.root / "conf"), command],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise SystemExit(f"postfix {command} failed: {done.stderr.strip()}")

    def version(self) -> str:
        """Postfix's mail_version."""
        done = subprocess.run(
            ["postconf", "-c", str(self.root / "conf"), "-h", "mail_version"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return done.stdout.strip()

    def close(self) -> None:
        """Stop the instance and remove its directories."""
        try:
            self._postfix("stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def bench_postfix(postfix: Postfix, sink: Sink, run: int, count: int) -> tuple[float, float]:
    """(until the sink has all, injection alone) seconds for Postfix relaying ``count``."""
    expected = sink.count + count
    start = time.perf_counter()
    with smtplib.SMTP("127.0.0.1", postfix.port, timeout=60) as client:
        for number in range(count):
            client.sendmail(
                "bench@sender.example", ["reader@receiver.example"], message(run, number)
            )
    injected = time.perf_counter()
    sink.wait_for(expected)
    return time.perf_counter() - start, injected - start


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s"


def _ms(count: int, seconds: float) -> str:
    return f"{1000 * seconds / count:.1f}"


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-postfix", action="store_true")
    parser.add_argument("--database-url", default=None, help="Default: a fresh SQLite file.")
    parser.add_argument("--file-sent", action="store_true", help="File each Sent copy too.")
    args = parser.parse_args()
    count = args.messages
    sink = Sink()
    postfix = None if args.no_postfix else Postfix(sink.port)
    rows: list[dict[str, Any]] = []
    try:
        if postfix is not None:
            print(f"Postfix {postfix.version()}, sink on 127.0.0.1:{sink.port}")
        print(
            "run | transport alone | direct lane (queue+send) | hand-off only | "
            "postfix (inject+relay) | postfix inject only | lane CPU ms/msg (queue, hand-off)"
        )
        for run in range(1, args.repeat + 1):
            row: dict[str, Any] = {"transport": bench_transport(sink, run, count)}
            row["lane"], row["handoff"], row["queue_cpu"], row["handoff_cpu"] = bench_lane(
                sink, run, count, args.database_url, args.file_sent
            )
            if postfix is not None:
                row["postfix"], row["inject"] = bench_postfix(postfix, sink, run, count)
            rows.append(row)
            print(
                f"{run} | {_rate(count, row['transport'])} | {_rate(count, row['lane'])} | "
                f"{_rate(count, row['handoff'])} | "
                + (
                    f"{_rate(count, row['postfix'])} | {_rate(count, row['inject'])}"
                    if postfix is not None
                    else "- | -"
                )
                + f" | {_ms(count, row['queue_cpu'])}, {_ms(count, row['handoff_cpu'])}",
                flush=True,
            )
    finally:
        if postfix is not None:
            postfix.close()
        sink.close()
    medians = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
    print(
        "median | "
        + " | ".join(
            f"{key} {_ms(count, seconds)} ms"
            if key.endswith("_cpu")
            else f"{key} {_rate(count, seconds)}"
            for key, seconds in medians.items()
        )
    )
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
