"""Propagation latency: JMAP ``Email/set`` → the change visible on Dovecot, with `mailroom serve`.

    python bench/propagation_latency.py [--samples 20] [--pause 0.5]

Starts a private Dovecot (tests/support/dovecot.py), adds an IMAP account to a
fresh SQLite store in a fresh data dir, syncs it once and appends two messages
per sample, then runs the real `mailroom serve` (its default one-process form:
HTTP, the queue consumers and the supervisor with its periodic duties) in a
child process. Each sample is one JMAP request over HTTP, timed from just
before the request until a second IMAP client (imapclient, polling every few
milliseconds) sees its effect:

* star:  ``keywords/$flagged: true`` → ``\\Flagged`` on the message in INBOX;
* trash: ``mailboxIds: {Trash}`` → the message gone from INBOX.

Between samples the bench waits a random time up to ``--pause`` seconds, so
samples do not fall in step with a periodic sweep. Prints p50/p95/max in
milliseconds for both.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from imapclient import IMAPClient
from sqlalchemy import select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.factories import make_message  # noqa: E402
from tests.support.dovecot import DovecotServer  # noqa: E402

from mailroom.config import Settings  # noqa: E402
from mailroom.jmap.auth import create_token  # noqa: E402
from mailroom.labels.resolver import system_label  # noqa: E402
from mailroom.owners import get_user  # noqa: E402
from mailroom.providers.imap import add_imap_account, sync_account  # noqa: E402
from mailroom.secrets import generate_key  # noqa: E402
from mailroom.store import open_store  # noqa: E402
from mailroom.store.models import Message  # noqa: E402

USING = ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"]


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def percentile(samples: list[float], share: float) -> float:
    """Nearest-rank percentile (the value at or below which ``share`` of samples lie)."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def wait_for(check: Callable[[], bool], start: float, timeout: float, what: str) -> float:
    """Poll ``check`` until true; the milliseconds since ``start``."""
    while not check():
        if time.perf_counter() - start > timeout:
            raise SystemExit(f"{what} did not reach Dovecot within {timeout:.0f} s")
        time.sleep(0.005)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20, help="samples of each kind")
    parser.add_argument("--pause", type=float, default=0.5, help="longest random pause (s)")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after (s)")
    args = parser.parse_args()
    star: list[float] = []
    trash: list[float] = []
    requests: list[float] = []  # the Email/set round trips alone
    with tempfile.TemporaryDirectory(prefix="mailroom-propagation-") as work:
        data = Path(work) / "data"
        key = generate_key()
        server = DovecotServer(Path(work) / "dovecot").start()
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
            sync_account(store, account, settings=settings)  # first contact: folders, marks
            imap = IMAPClient(server.host, port=server.port, ssl=False)
            imap.login("bench", "pw")
            headers = [f"p{n}@bench" for n in range(2 * args.samples)]
            for mid in headers:
                imap.append("INBOX", make_message(mid, subject=mid))
            sync_account(store, account, settings=settings)  # new mail above the mark
            with store.session() as session:
                user = get_user(session, "me")
                trash_box = f"L{system_label(session, user.id, 'trash').id}"
                ids = dict(
                    session.execute(
                        select(Message.message_id_header, Message.id).where(
                            Message.message_id_header.in_(headers)
                        )
                    ).all()
                )
                token = create_token(session, "me", "bench")
            store.dispose()
            imap.select_folder("INBOX", readonly=True)
            uids = {
                env.message_id.decode().strip("<>"): uid
                for uid, env in (
                    (uid, data[b"ENVELOPE"])
                    for uid, data in imap.fetch(imap.search(), [b"ENVELOPE"]).items()
                )
            }
            port = free_port()
            env = {
                **os.environ,
                "MAILROOM_DATA_DIR": str(data),
                "MAILROOM_MASTER_KEY": key,
                "MAILROOM_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
            }
            env.pop("MAILROOM_DATABASE_URL", None)
            serve = subprocess.Popen(
                [sys.executable, "-m", "mailroom", "serve", "--port", str(port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            base = f"http://127.0.0.1:{port}"
            http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30)
            try:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        http.get(f"{base}/health")
                        break
                    except httpx.TransportError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
                session_doc = http.get(f"{base}/.well-known/jmap").json()
                api = session_doc["apiUrl"]
                account_id = session_doc["primaryAccounts"]["urn:ietf:params:jmap:mail"]
                time.sleep(3.0)  # let the first supervisor tick and sweep pass

                def email_set(message: int, patch: dict[str, Any]) -> None:
                    sent = time.perf_counter()
                    body = {
                        "using": USING,
                        "methodCalls": [
                            [
                                "Email/set",
                                {"accountId": account_id, "update": {f"M{message}": patch}},
                                "s",
                            ]
                        ],
                    }
                    answer = http.post(
                        api, content=json.dumps(body), headers={"Content-Type": "application/json"}
                    ).json()
                    requests.append((time.perf_counter() - sent) * 1000)
                    result = answer["methodResponses"][0][1]
                    if f"M{message}" not in result.get("updated", {}):
                        raise SystemExit(f"Email/set refused: {answer}")

                def flagged(uid: int) -> bool:
                    imap.noop()
                    got = imap.fetch([uid], [b"FLAGS"])
                    return uid in got and b"\\Flagged" in got[uid][b"FLAGS"]

                def gone(uid: int) -> bool:
                    imap.noop()
                    return uid not in imap.fetch([uid], [b"FLAGS"])

                for n in range(args.samples):
                    starred, trashed = headers[2 * n], headers[2 * n + 1]
                    time.sleep(random.uniform(0, args.pause))
                    start = time.perf_counter()
                    email_set(ids[starred], {"keywords/$flagged": True})
                    star.append(
                        wait_for(partial(flagged, uids[starred]), start, args.timeout, "a star")
                    )
                    time.sleep(random.uniform(0, args.pause))
                    start = time.perf_counter()
                    email_set(ids[trashed], {"mailboxIds": {trash_box: True}})
                    trash.append(
                        wait_for(partial(gone, uids[trashed]), start, args.timeout, "a trash")
                    )
                    print(
                        f"sample {n + 1}: star {star[-1]:.0f} ms, trash {trash[-1]:.0f} ms",
                        file=sys.stderr,
                    )
            finally:
                http.close()
                serve.terminate()
                serve.wait(timeout=60)
                imap.logout()
        finally:
            server.cleanup()
    for name, samples in (("star → \\Flagged", star), ("trash → gone from INBOX", trash)):
        print(
            f"{name}: {len(samples)} samples, p50 {statistics.median(samples):.0f} ms, "
            f"p95 {percentile(samples, 0.95):.0f} ms, max {max(samples):.0f} ms"
        )
    print(
        f"of which the Email/set request itself: p50 {statistics.median(requests):.0f} ms, "
        f"p95 {percentile(requests, 0.95):.0f} ms"
    )
    print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
