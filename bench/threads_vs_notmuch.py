"""Threading benchmark: mailroom's conversations against notmuch's, and arrival-order independence.

    python bench/threads_vs_notmuch.py [--maildir DIR | --corpus-dir DIR] [--orders 5]
                                       [--seed 1] [--list-rescues]

1. Without ``--maildir``: writes the full SpamAssassin corpus (6,046 messages) as a
   Maildir with ``bench/corpus.py`` into a folder of its own (``--corpus-dir``, default
   ``bench/.work/corpus-maildir``). With ``--maildir DIR`` it reads that Maildir as it
   is and never writes into it: a benchmark pointed at someone's mail must not add a
   corpus (thousands of files and a ``.Spam`` folder) to it.
2. Imports it into a fresh SQLite store with ``mailroom.providers.local.import_path``
   (Maildir order, batches of 200) and reads the partition: Maildir file → thread.
3. Indexes the same Maildir with ``notmuch new`` (database outside the Maildir) and reads
   notmuch's partition with ``notmuch show --format=json --body=false '*'``.
4. Prints thread counts and pairwise precision / recall (a pair = two files in one thread;
   precision = share of mailroom's pairs notmuch also has, recall = share of notmuch's
   pairs mailroom has), then accounts for every difference:
   - "references only": mailroom's stages 1, 2 and 4 recomputed from the stored
     references (no subject rescue) against notmuch;
   - "notmuch model": notmuch's rule rebuilt from the raw headers (every ``<...>`` in
     In-Reply-To and References is an id, bare words are not) — must equal notmuch;
   - the same model without ids that are addresses of the message itself — must equal
     mailroom's references-only partition.
5. Imports the corpus ``--orders`` more times in random orders and random batch sizes and
   checks every partition is identical to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import date
from email import message_from_bytes
from email.policy import compat32
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import WORK_DIR, ensure_corpus_maildir  # noqa: E402
from sqlalchemy import select  # noqa: E402

from ingest import count_messages  # noqa: E402
from mailroom.mime import parse_address_list, parse_id_list  # noqa: E402
from mailroom.providers.local import import_path  # noqa: E402
from mailroom.providers.local.source import LocalMessage, LocalSource, open_source  # noqa: E402
from mailroom.store import open_store  # noqa: E402
from mailroom.store.models import Message, MessageLocation, MessageRef  # noqa: E402

Partition = dict[str, object]  # file key -> thread label


def file_key(name: str) -> str:
    """A Maildir file's key: its base name without the ``:2,FLAGS`` info."""
    return os.path.basename(name).partition(":")[0]


# ------------------------------------------------------------------ partitions


def pairs(partition: Partition) -> set[tuple[str, str]]:
    """Every unordered pair of files that share a thread."""
    groups: dict[object, list[str]] = defaultdict(list)
    for key, thread in partition.items():
        groups[thread].append(key)
    found: set[tuple[str, str]] = set()
    for members in groups.values():
        members.sort()
        for i, a in enumerate(members):
            found.update((a, b) for b in members[i + 1 :])
    return found


def threads(partition: Partition) -> int:
    """How many threads the partition has."""
    return len(set(partition.values()))


def compare(name: str, ours: Partition, theirs: Partition) -> tuple[float, float]:
    """Print and return pairwise precision and recall of ``ours`` against ``theirs``."""
    assert set(ours) == set(theirs), "the two partitions cover different files"
    a, b = pairs(ours), pairs(theirs)
    precision = len(a & b) / len(a) if a else 1.0
    recall = len(a & b) / len(b) if b else 1.0
    print(
        f"{name:<46} threads {threads(ours):>5} vs {threads(theirs):>5}   "
        f"pairs {len(a):>5} vs {len(b):>5}   precision {precision:.4f}   recall {recall:.4f}"
    )
    return precision, recall


class _Components:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, node: str) -> str:
        while self.parent.setdefault(node, node) != node:
            self.parent[node] = self.parent[self.parent[node]]
            node = self.parent[node]
        return node

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def components(links: dict[str, Iterable[str]]) -> Partition:
    """Connected components of files linked through the ids they carry."""
    graph = _Components()
    for key, ids in links.items():
        graph.find("f" + key)
        for ident in ids:
            graph.union("f" + key, "i" + ident)
    return {key: graph.find("f" + key) for key in links}


# ------------------------------------------------------------------ mailroom


class ShuffledSource(LocalSource):
    """A local source whose messages arrive in a seeded random order."""

    def __init__(self, inner: LocalSource, seed: int) -> None:
        super().__init__(inner.path)
        self.inner, self.seed = inner, seed
        self.kind = inner.kind

    def count(self) -> int:
        return self.inner.count()

    def messages(self) -> Iterator[LocalMessage]:
        items = list(self.inner.messages())
        random.Random(self.seed).shuffle(items)
        return iter(items)


def mailroom_import(
    maildir: Path, work: Path, seed: int | None = None, batch_size: int = 200
) -> tuple[Partition, Partition, float, dict[str, str]]:
    """Import into a fresh SQLite store.

    Returns (partition, references-only partition, seconds, file → subject).
    """
    store = open_store(f"sqlite:///{work / 'store.sqlite3'}")
    source = open_source(maildir)
    if seed is not None:
        source = ShuffledSource(source, seed)
    start = time.perf_counter()
    summary = import_path(store, maildir, source=source, batch_size=batch_size)
    seconds = time.perf_counter() - start
    if summary.failed:
        print(f"  {len(summary.failed)} messages failed: {summary.failed[:3]}")
    with store.session() as session:
        rows = session.execute(
            select(MessageLocation.provider_ref, Message.id, Message.thread_id).join(
                Message, Message.id == MessageLocation.message_id
            )
        ).all()
        subject_of = dict(session.execute(select(Message.id, Message.subject)).all())
        headers = dict(session.execute(select(Message.id, Message.message_id_header)).all())
        refs: dict[int, list[str]] = defaultdict(list)
        for message_id, ref in session.execute(select(MessageRef.message_id, MessageRef.ref)):
            refs[message_id].append(ref)
    store.dispose()
    partition: Partition = {file_key(str(ref)): thread for ref, _, thread in rows}
    links = {
        file_key(str(ref)): [
            *([headers[mid]] if headers.get(mid) else []),
            *refs.get(mid, []),
            f"message-{mid}",
        ]
        for ref, mid, _ in rows
    }
    subjects = {file_key(str(ref)): subject_of[mid] for ref, mid, _ in rows}
    return partition, components(links), seconds, subjects


def rescue_listing(ours: Partition, references: Partition, subjects: dict[str, str]) -> list[str]:
    """One line per conversation the subject rescue built: the subjects it joined."""
    lines = []
    for members in _groups(ours):
        parts: dict[object, list[str]] = defaultdict(list)
        for key in members:
            parts[references[key]].append(key)
        if len(parts) > 1:
            pieces = sorted(parts.values(), key=lambda keys: (-len(keys), min(keys)))
            lines.append(
                " + ".join(f"{len(keys)}x {subjects[min(keys)][:50]!r}" for keys in pieces)
            )
    return sorted(lines)


# ------------------------------------------------------------------ notmuch


def notmuch_partition(maildir: Path, work: Path) -> tuple[Partition, float]:
    """Index with ``notmuch new`` in ``work``; (file → thread, seconds)."""
    (work / "db").mkdir(parents=True, exist_ok=True)
    config = work / "config"
    config.write_text(  # as bench/ingest.py run_notmuch, but keeping the database to query
        f"[database]\npath={work}/db\nmail_root={maildir.resolve()}\n"
        "[user]\nname=bench\nprimary_email=bench@example.org\n"
        "[new]\ntags=\n[maildir]\nsynchronize_flags=false\n"
    )
    env = {**os.environ, "NOTMUCH_CONFIG": str(config)}
    start = time.perf_counter()
    done = subprocess.run(["notmuch", "new", "--quiet"], env=env, capture_output=True)
    if done.returncode not in (0, 1):  # 1 only reports ignored non-mail files
        raise SystemExit(f"notmuch new failed: {done.stderr.decode(errors='replace')}")
    seconds = time.perf_counter() - start
    shown = subprocess.run(
        ["notmuch", "show", "--format=json", "--body=false", "*"],
        env=env,
        check=True,
        capture_output=True,
    )
    partition: Partition = {}

    def walk(node: list[object], thread: int) -> None:
        message, children = node
        assert isinstance(message, dict) and isinstance(children, list)
        for name in message["filename"]:
            partition[file_key(name)] = thread
        for child in children:
            walk(child, thread)

    for index, thread in enumerate(json.loads(shown.stdout)):
        for root in thread:
            walk(root, index)
    return partition, seconds


def maildir_folders(maildir: Path) -> list[Path]:
    """The Maildir and its Maildir++ sub-folders (``.Name``) that hold mail."""
    candidates = [maildir, *sorted(p for p in maildir.iterdir() if p.name.startswith("."))]
    return [f for f in candidates if (f / "cur").is_dir() or (f / "new").is_dir()]


def given_maildir(path: Path) -> Path:
    """A Maildir the user named, checked but untouched; SystemExit in one sentence if it is none."""
    if not path.is_dir() or not maildir_folders(path):
        raise SystemExit(
            f"{path} is not a Maildir (no cur/ or new/ folder); give a Maildir, or leave out "
            "--maildir to build the corpus in a folder of its own."
        )
    return path


def notmuch_models(maildir: Path) -> tuple[Partition, Partition, dict[str, list[str]]]:
    """notmuch's rule rebuilt from raw headers, with and without address-as-id references.

    Returns (model, model without address ids, file → the address ids it carried).
    """
    full: dict[str, list[str]] = {}
    strict: dict[str, list[str]] = {}
    addressed: dict[str, list[str]] = {}
    files = [
        path
        for folder in maildir_folders(maildir)
        for sub in ("cur", "new")
        if (folder / sub).is_dir()
        for path in sorted((folder / sub).iterdir())
        if path.is_file()
    ]
    for path in files:
        message = message_from_bytes(path.read_bytes(), policy=compat32)
        key = file_key(path.name)
        own = str(message.get("Message-ID") or "")
        ids = parse_id_list(own)[:1] or [f"no-id-{key}"]
        named = [
            ident
            for header in ("In-Reply-To", "References")
            for value in message.get_all(header) or []
            if "<" in str(value)
            for ident in parse_id_list(str(value))
        ]
        mine = {
            a.email.lower()
            for header in ("From", "To", "Cc", "Bcc", "Reply-To", "Sender")
            for value in message.get_all(header) or []
            for a in parse_address_list(str(value))
        }
        full[key] = ids + named
        addressed[key] = [i for i in named if i.lower() in mine]
        strict[key] = ids + [i for i in named if i.lower() not in mine]
    return components(full), components(strict), addressed


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and the arrival-order check; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--maildir", type=Path, default=None, help="read this Maildir (never written to)"
    )
    source.add_argument(
        "--corpus-dir",
        type=Path,
        default=WORK_DIR / "corpus-maildir",
        help="where to build the SpamAssassin corpus (a folder of the benchmark's own)",
    )
    parser.add_argument("--orders", type=int, default=5, help="random arrival orders to check")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--list-rescues", action="store_true", help="print every conversation the rescue built"
    )
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    if args.maildir is not None:
        maildir = given_maildir(args.maildir)
    else:
        maildir = ensure_corpus_maildir(args.corpus_dir)
    print(f"{date.today()}  Maildir {maildir}: {count_messages(maildir)} files")

    with tempfile.TemporaryDirectory(prefix="threads-bench-") as tmp:
        work = Path(tmp)
        (work / "mailroom").mkdir()
        ours, references_only, seconds, subjects = mailroom_import(maildir, work / "mailroom")
        print(f"mailroom import (Maildir order, batches of 200): {seconds:.1f} s")
        theirs, nm_seconds = notmuch_partition(maildir, work / "notmuch")
        print(f"notmuch new: {nm_seconds:.1f} s")
        model, strict_model, addressed = notmuch_models(maildir)
        print()
        compare("mailroom (all stages) vs notmuch", ours, theirs)
        compare("mailroom references only vs notmuch", references_only, theirs)
        compare("notmuch model (raw headers) vs notmuch", model, theirs)
        compare("mailroom references only vs model w/o addresses", references_only, strict_model)
        rescued = pairs(ours) - pairs(references_only)
        moved = {key for pair in rescued for key in pair}
        print(
            f"\nsubject rescue: {threads(references_only) - threads(ours)} reference threads "
            f"joined others, adding {len(rescued)} pairs over {len(moved)} files; "
            f"notmuch has no subject threading."
        )
        lost = pairs(theirs) - pairs(references_only)
        carriers = sorted({k for k, ids in addressed.items() if ids})
        print(
            f"address ids: {len(carriers)} files name an address of their own as a message id; "
            f"notmuch joins {len(lost)} pairs through them, mailroom does not."
        )
        for key in carriers[:12]:
            print(f"  {key}: {', '.join(addressed[key])}")
        if args.list_rescues:
            print("\nconversations joined by the subject rescue (largest reference part first):")
            for line in rescue_listing(ours, references_only, subjects):
                print(f"  {line}")

        print()
        rng = random.Random(args.seed)
        reference = {frozenset(g) for g in _groups(ours)}
        identical = 0
        for run in range(args.orders):
            seed, size = rng.randrange(10**6), rng.choice([37, 100, 200, 333, 500])
            folder = work / f"order-{run}"
            folder.mkdir()
            partition, _, order_seconds, _ = mailroom_import(maildir, folder, seed, size)
            same = {frozenset(g) for g in _groups(partition)} == reference
            identical += same
            print(
                f"random order {run + 1} (seed {seed}, batches of {size}): {order_seconds:.1f} s, "
                f"{threads(partition)} threads, {'identical' if same else 'DIFFERENT'} partition"
            )
        print(f"{identical} of {args.orders} random arrival orders gave the identical partition")


def _groups(partition: Partition) -> list[list[str]]:
    groups: dict[object, list[str]] = defaultdict(list)
    for key, thread in partition.items():
        groups[thread].append(key)
    return list(groups.values())


if __name__ == "__main__":
    main()
