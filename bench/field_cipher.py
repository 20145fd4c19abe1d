"""What per-owner field encryption costs: sealing, opening and hashing values; deleting an owner.

    python bench/field_cipher.py [--values N] [--messages N] [--repeat R]

1. ``FieldCipher`` in one session of a SQLite store: seal+open per value at the
   sizes item 2 will encrypt (a subject, a preview, a 4 KiB text body, a 20 KiB
   raw message) and ``lookup_hash`` per value (a Message-ID) — values per second,
   the median of ``--repeat`` runs of ``--values`` values each.
2. ``delete_owner`` (key first, rows with ``secure_delete``, FTS merge, WAL
   truncated) of one of two owners, each with ``--messages`` messages stored
   through the ingest pipeline, in a fresh SQLite store per run; seconds, median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from email.message import EmailMessage
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from mailroom.crypto import FieldCipher, MasterKeyWrapper, OwnerKeys  # noqa: E402
from mailroom.crypto.shredding import delete_owner  # noqa: E402
from mailroom.ingest import IncomingMessage, store_batch  # noqa: E402
from mailroom.labels.resolver import ensure_system_labels  # noqa: E402
from mailroom.owners import get_or_create_account, get_or_create_user  # noqa: E402
from mailroom.store.engine import Store, open_store  # noqa: E402

SIZES = {"subject (60 B)": 60, "preview (200 B)": 200, "body (4 KiB)": 4096, "raw (20 KiB)": 20480}


def _cipher_rates(store: Store, values: int, repeat: int) -> dict[str, float]:
    wrapper = MasterKeyWrapper(os.urandom(32))
    rates: dict[str, list[float]] = {}
    with store.session() as session:
        owner = get_or_create_user(session, "bench").id
        cipher = FieldCipher(OwnerKeys(session, wrapper))
        cipher.lookup_hash(owner, "message-id", "warm@up")  # the key is made and unwrapped once
        for name, size in SIZES.items():
            value = os.urandom(size)
            for _ in range(repeat):
                start = time.perf_counter()
                for row in range(values):
                    sealed = cipher.encrypt(owner, "messages", "subject", row, value)
                    cipher.decrypt(owner, "messages", "subject", row, sealed)
                rates.setdefault(f"seal+open {name}", []).append(
                    values / (time.perf_counter() - start)
                )
        for _ in range(repeat):
            start = time.perf_counter()
            for row in range(values):
                cipher.lookup_hash(owner, "message-id", f"{row}.1234@mail.example.org")
            rates.setdefault("lookup_hash (Message-ID)", []).append(
                values / (time.perf_counter() - start)
            )
    return {name: statistics.median(runs) for name, runs in rates.items()}


def _message(owner: str, n: int) -> bytes:
    message = EmailMessage()
    message["Message-ID"] = f"<{owner}.{n}@bench.example>"
    message["From"] = f"Sender {n} <sender{n}@{owner}.example>"
    message["To"] = f"{owner}@example.org"
    message["Subject"] = f"{owner} report number {n}"
    message.set_content(f"Body of message {n} for {owner}.\n" + "Some text of a line.\n" * 60)
    return message.as_bytes()


def _fill(store: Store, owner: str, messages: int) -> None:
    with store.session() as session:
        user = get_or_create_user(session, owner)
        account = get_or_create_account(session, user, owner, "local")
        inbox = ensure_system_labels(session, user.id)["inbox"]
        user_id, account_id = user.id, account.id
    for start in range(0, messages, 500):
        with store.session() as session:
            items = [
                IncomingMessage(f"{owner}{n}", _message(owner, n), label_ids=[inbox])
                for n in range(start, min(start + 500, messages))
            ]
            store_batch(session, account_id, user_id, items)


def _deletion_seconds(messages: int, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as work:
            store = open_store(f"sqlite:///{Path(work) / 'bench.sqlite3'}")
            _fill(store, "alice", messages)
            _fill(store, "bob", messages)
            start = time.perf_counter()
            delete_owner(store, "alice")
            runs.append(time.perf_counter() - start)
            store.dispose()
    return statistics.median(runs)


def main() -> None:
    """Run both measurements and print them with the load average."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=20_000)
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        store = open_store(f"sqlite:///{Path(work) / 'cipher.sqlite3'}")
        for name, rate in _cipher_rates(store, args.values, args.repeat).items():
            print(f"{name:<32} {rate:>10,.0f} values/s")
        store.dispose()
    seconds = _deletion_seconds(args.messages, args.repeat)
    print(f"delete_owner, {args.messages:,} of {2 * args.messages:,} messages: {seconds:.2f} s")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
