"""IMAP import benchmark: mailroom against mbsync, pulling the same mailbox from Dovecot.

    python bench/imap_import.py [--copies 5] [--database-url URL] [--skip-mbsync]

1. ``bench/corpus.py`` writes the SpamAssassin corpus x N as a Maildir (cached in
   ``bench/.work/corpus-xN``; ham in INBOX, spam in ``.Spam``: 6,046 x N messages).
2. A private Dovecot (``tests/support/dovecot.py``) gets one user whose Maildir is a
   copy of it. Dovecot indexes it and every file is read once before any timing, so
   neither tool pays for the server's first look or a cold page cache.
3. ``mbsync`` (isync) pulls every folder into an empty Maildir: wall time.
4. mailroom, in a child process, on a fresh store (SQLite in a temp dir unless
   ``--database-url``): one sync, then import pages until the history is done, on one
   connection — fetching, parsing, storing raw bytes, threading, categorizing and
   indexing every message. Wall time, messages stored, peak RSS.

Two more lines explain where the time goes (skip them with ``--no-breakdown``):

* ``imap-fetch-only``: mailroom's IMAP layer alone — the importer's pages of 50
  (envelope + body in one FETCH), nothing stored;
* ``local-import``: mailroom's ingest alone — the same Maildir imported from disk by
  the local provider (batches of 50, like an import page), no IMAP.

Prints one JSON object per run and a summary line with the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work"
sys.path.insert(0, str(ROOT))

from tests.support.dovecot import DovecotServer  # noqa: E402

USER, PASSWORD = "bench", "bench-pw"


def ensure_corpus(copies: int) -> Path:
    """The corpus Maildir with ``copies`` copies (written by bench/corpus.py, cached)."""
    dest = WORK / f"corpus-x{copies}"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "corpus.py"), str(dest), "--copies", str(copies)],
        check=True,
    )
    return dest


def count(maildir: Path) -> int:
    """Messages in a Maildir and its Maildir++ folders."""
    total = 0
    for folder in [maildir, *(p for p in maildir.iterdir() if p.name.startswith("."))]:
        for sub in ("cur", "new"):
            if (folder / sub).is_dir():
                total += len(os.listdir(folder / sub))
    return total


def load_mailbox(server: DovecotServer, corpus: Path) -> int:
    """Copy the corpus into the user's Maildir, let Dovecot index it, read every file once."""
    server.add_user(USER, PASSWORD)
    target = server.maildir(USER)
    shutil.copytree(corpus, target, dirs_exist_ok=True)
    if server.is_root:
        for path in [target, *target.rglob("*")]:
            os.chown(path, server.mail_uid, server.mail_gid)
    for path in target.rglob("*"):
        if path.is_file():
            path.read_bytes()  # into the page cache
    from imapclient import IMAPClient

    client = IMAPClient(server.host, port=server.port, ssl=False, timeout=600)
    client.login(USER, PASSWORD)
    messages = 0
    for _flags, _delim, name in client.list_folders():
        info = client.select_folder(name, readonly=True)
        if info[b"EXISTS"]:
            client._imap.fetch("1:*", "(RFC822.SIZE)")  # builds the index and size cache
        messages += int(info[b"EXISTS"])
    client.logout()
    return messages


def run_mbsync(server: DovecotServer, scratch: Path) -> dict[str, float]:
    """Pull every folder with mbsync into an empty Maildir; wall time and messages."""
    local = scratch / "mbsync-maildir"
    local.mkdir()
    config = scratch / "mbsyncrc"
    config.write_text(
        f"""IMAPAccount bench
Host {server.host}
Port {server.port}
User {USER}
Pass {PASSWORD}
SSLType None
AuthMechs LOGIN

IMAPStore remote
Account bench

MaildirStore local
Path {local}/
Inbox {local}/INBOX
SubFolders Verbatim

Channel pull
Far :remote:
Near :local:
Patterns *
Create Near
Sync Pull
SyncState *
"""
    )
    start = time.perf_counter()
    done = subprocess.run(["mbsync", "-q", "-c", str(config), "-a"], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"mbsync failed ({done.returncode}): {done.stderr.strip()}")
    pulled = sum(count(p) for p in local.iterdir() if p.is_dir() and (p / "cur").is_dir())
    return {"seconds": seconds, "messages": pulled}


CHILD = r"""
import json, resource, sys, time
from mailroom.config import Settings
from mailroom.providers.imap import add_imap_account, import_page, sync_account
from mailroom.providers.imap.login import account_connection
from mailroom.secrets import generate_key
from mailroom.store import open_store
from mailroom.store.models import Message
from sqlalchemy import func, select

host, port, user, password, url, data = sys.argv[1:7]
settings = Settings(master_key=generate_key(), allowed_private_hosts=host, data_dir=data)
store = open_store(url or f"sqlite:///{data}/bench.sqlite3")
account = add_imap_account(store, settings, name="bench", host=host, port=int(port),
                           tls="none", login=user, password=password)
start = time.perf_counter()
pages = 0
with account_connection(store, account, settings=settings) as conn:
    sync_account(store, account, settings=settings, connection=conn)
    while import_page(store, account, settings=settings, connection=conn):
        pages += 1
seconds = time.perf_counter() - start
with store.session() as session:
    stored = session.scalar(select(func.count()).select_from(Message))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "messages": stored, "pages": pages, "rss_mib": rss}))
"""


def run_mailroom(
    server: DovecotServer, scratch: Path, database_url: str | None
) -> dict[str, float]:
    """Sync + import the mailbox into a fresh store in a child process."""
    data = scratch / "mailroom-data"
    data.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            server.host,
            str(server.port),
            USER,
            PASSWORD,
            database_url or "",
            str(data),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"mailroom failed:\n{done.stderr[-4000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


FETCH_ONLY = r"""
import json, sys, time
from mailroom.providers.imap.account import ImapConfig
from mailroom.providers.imap.connection import connect
from mailroom.providers.imap.fetcher import fetch_envelopes_and_bodies

host, port, user, password = sys.argv[1:5]
start = time.perf_counter()
conn = connect(ImapConfig(host, int(port), "none", user), password, allowed_hosts=[host])
fetched = 0
for folder in conn.list_folders():
    conn.select(folder.name)
    uids = conn.uids("1:*")
    for end in range(len(uids), 0, -50):
        _envelopes, bodies, _failed = fetch_envelopes_and_bodies(conn, uids[max(0, end - 50):end])
        fetched += len(bodies)
conn.close()
print(json.dumps({"seconds": time.perf_counter() - start, "messages": fetched}))
"""

LOCAL = r"""
import json, resource, sys, time
from pathlib import Path
from mailroom.providers.local import import_path
from mailroom.store import open_store

corpus, url, data = sys.argv[1:4]
store = open_store(url or f"sqlite:///{data}/local.sqlite3")
start = time.perf_counter()
summary = import_path(store, Path(corpus), batch_size=50)
seconds = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "messages": summary.imported, "rss_mib": rss}))
"""


def run_child(code: str, *args: str) -> dict[str, float]:
    """Run a measurement in a fresh interpreter; returns its JSON line."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"measurement failed:\n{done.stderr[-4000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--skip-mbsync", action="store_true")
    parser.add_argument("--no-breakdown", action="store_true")
    args = parser.parse_args()
    corpus = ensure_corpus(args.copies)
    with tempfile.TemporaryDirectory(prefix="mailroom-imap-bench-") as tmp:
        scratch = Path(tmp)
        with DovecotServer(scratch / "server") as server:
            served = load_mailbox(server, corpus)
            print(json.dumps({"tool": "dovecot", "messages": served}), flush=True)
            results: dict[str, dict[str, float]] = {}
            if not args.skip_mbsync:
                results["mbsync"] = run_mbsync(server, scratch)
                print(json.dumps({"tool": "mbsync", **results["mbsync"]}), flush=True)
            results["mailroom"] = run_mailroom(server, scratch, args.database_url)
            print(json.dumps({"tool": "mailroom", **results["mailroom"]}), flush=True)
            if not args.no_breakdown:
                fetch = run_child(FETCH_ONLY, server.host, str(server.port), USER, PASSWORD)
                print(json.dumps({"tool": "imap-fetch-only", **fetch}), flush=True)
                (scratch / "local-data").mkdir()
                local = run_child(
                    LOCAL, str(corpus), args.database_url or "", str(scratch / "local-data")
                )
                print(json.dumps({"tool": "local-import", **local}), flush=True)
    if "mbsync" in results:
        ratio = results["mailroom"]["seconds"] / results["mbsync"]["seconds"]
        print(
            f"{served} messages: mbsync {results['mbsync']['seconds']:.1f} s, "
            f"mailroom {results['mailroom']['seconds']:.1f} s ({ratio:.2f}x mbsync; target 2x)"
        )


if __name__ == "__main__":
    main()
