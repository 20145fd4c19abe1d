"""Live latency: APPEND to Dovecot → message visible in the store, with `mailroom serve` running.

    python bench/live_latency.py [--messages 200]

Starts a private Dovecot (tests/support/dovecot.py), adds an IMAP account to a
fresh SQLite store, runs `mailroom serve` (web + consumers + supervisor with
the IMAP IDLE watcher) in a child process, then appends messages one at a time
from a second IMAP client and measures how long each takes to appear in the
store. Prints p50/p95/max in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from imapclient import IMAPClient
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.factories import make_message  # noqa: E402
from tests.support.dovecot import DovecotServer  # noqa: E402

from mailroom.config import Settings  # noqa: E402
from mailroom.providers.imap import add_imap_account  # noqa: E402
from mailroom.secrets import generate_key  # noqa: E402
from mailroom.store import open_store  # noqa: E402
from mailroom.store.models import Account, Message  # noqa: E402


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mailroom-live-") as work:
        data = Path(work) / "data"
        key = generate_key()
        server = DovecotServer(
            Path(work) / "dovecot", extra_config="mailbox_idle_check_interval = 1 secs\n"
        ).start()
        try:
            server.add_user("bench", "pw")
            settings = Settings(master_key=key, allowed_private_hosts="127.0.0.1", data_dir=data)
            store = open_store(settings.resolved_database_url, data)
            account = add_imap_account(
                store,
                settings,
                name="bench",
                host=server.host,
                port=server.port,
                tls="none",
                login="bench",
                password="pw",
            )
            env = {
                **os.environ,
                "MAILROOM_DATA_DIR": str(data),
                "MAILROOM_MASTER_KEY": key,
                "MAILROOM_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
            }
            env.pop("MAILROOM_DATABASE_URL", None)
            serve = subprocess.Popen(
                [sys.executable, "-m", "mailroom", "serve", "--port", str(free_port())],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    with store.session() as session:
                        state = session.scalar(
                            select(Account.watch_state).where(Account.id == account)
                        )
                    if state == "watching":
                        break
                    time.sleep(0.1)
                else:
                    raise SystemExit("the watcher never started; is `mailroom serve` running it?")
                time.sleep(1.0)
                latencies = []
                client = IMAPClient(server.host, port=server.port, ssl=False)
                client.login("bench", "pw")
                for n in range(args.messages):
                    mid = f"live{n}@bench"
                    raw = make_message(mid, subject=f"Live {n}")
                    start = time.perf_counter()
                    client.append("INBOX", raw)
                    while True:
                        with store.session() as session:
                            seen = session.scalar(
                                select(func.count()).where(Message.message_id_header == mid)
                            )
                        if seen:
                            break
                        if time.perf_counter() - start > 30:
                            raise SystemExit(f"message {n} did not arrive within 30 s")
                        time.sleep(0.002)
                    latencies.append((time.perf_counter() - start) * 1000)
                client.logout()
            finally:
                serve.terminate()
                serve.wait(timeout=60)
        finally:
            server.cleanup()
    latencies.sort()
    p95 = latencies[int(len(latencies) * 0.95) - 1]
    print(
        f"live latency over {len(latencies)} messages: p50 {statistics.median(latencies):.0f} ms, "
        f"p95 {p95:.0f} ms, max {latencies[-1]:.0f} ms"
    )


if __name__ == "__main__":
    main()
