"""IMAP import benchmark: mailroom against mbsync, pulling the same mailbox from Dovecot.

    python bench/imap_import.py [--copies 5] [--database-url URL] [--skip-mbsync]
                                [--one-folder] [--cli] [--tty] [--repeat N]
                                [--py-spy FILE [--py-spy-idle]]

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

With ``--one-folder`` the server holds the whole corpus in INBOX (30,230 messages
for ``--copies 5``), the case where one big folder's UID space is walked page by page.
With ``--cli`` mailroom is measured as a person runs it: in a fresh data dir,
``mailroom keys init`` and ``mailroom account add imap`` (not timed), then the timed
``mailroom sync bench --until-imported`` as a subprocess — interpreter and CLI
start-up, migrations check, the syncer's own login and the progress bar included.
``--tty`` runs that command on a pseudo-terminal, so the progress bar is drawn.
``--repeat N`` measures mbsync and mailroom N times against the same server,
alternating, and prints the medians. The issue's case is
``--copies 5 --one-folder --cli --repeat 3``.

Two more lines explain where the time goes (skip them with ``--no-breakdown``):

* ``imap-fetch-only``: mailroom's IMAP layer alone — the importer's pages of 50
  (envelope + body in one FETCH), nothing stored;
* ``local-import``: mailroom's ingest alone — the same Maildir imported from disk by
  the local provider (batches of 50, like an import page), no IMAP.

Prints one JSON object per run and a summary line with the ratio. Each run also
reports ``cpu_s``, the CPU time (user + system) of the measured command and every
process under it: on a machine loaded by other work the wall times move with the
load, the CPU times much less, so their ratio is the steadier figure. The
summary line gives both; a summary line with ``load`` names the 1-minute load
average at the start and the end. ``cpu_s`` counts only processes that were
waited for, which leaves out mailroom's parse worker (its forkserver is never
reaped); ``tree_cpu_s`` (``--cli``) reads every process under the command from
``/proc`` and is the figure to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
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


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class TreeCPU:
    """CPU seconds (user + system) of a process and everything under it, read from /proc.

    ``RUSAGE_CHILDREN`` counts only processes somebody waited for: mailroom's parse
    worker is a child of a forkserver that nobody reaps, so its CPU (a third or more
    of the import) was missing from ``cpu_s``. A thread reads ``/proc/*/stat`` every
    50 ms and keeps the last figure of each process that descends from the root (a
    process that exits loses at most its last 50 ms). Linux only.
    """

    def __init__(self, root: int) -> None:
        import threading

        self.root = root
        self._tree: set[int] = {root}
        self._cpu: dict[tuple[int, int], float] = {}
        self._tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._scan()
            self._stop.wait(0.05)

    def _scan(self) -> None:
        rows: list[tuple[int, int, int, float]] = []  # pid, ppid, start, cpu
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as stat:
                    text = stat.read()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2 :].split()
            cpu = (int(fields[11]) + int(fields[12])) / self._tick
            rows.append((int(name), int(fields[1]), int(fields[19]), cpu))
        grew = True
        while grew:  # parents may be listed after their children
            grew = False
            for pid, ppid, _start, _cpu in rows:
                if ppid in self._tree and pid not in self._tree:
                    self._tree.add(pid)
                    grew = True
        for pid, _ppid, start, cpu in rows:
            if pid in self._tree:
                self._cpu[(pid, start)] = cpu

    def stop(self) -> float:
        """Stop sampling; the CPU seconds of the whole tree."""
        self._stop.set()
        self._thread.join()
        return round(sum(self._cpu.values()), 2)


def count(maildir: Path) -> int:
    """Messages in a Maildir and its Maildir++ folders."""
    total = 0
    for folder in [maildir, *(p for p in maildir.iterdir() if p.name.startswith("."))]:
        for sub in ("cur", "new"):
            if (folder / sub).is_dir():
                total += len(os.listdir(folder / sub))
    return total


def load_mailbox(server: DovecotServer, corpus: Path, *, one_folder: bool = False) -> int:
    """Copy the corpus into the user's Maildir, let Dovecot index it, read every file once.

    ``one_folder``: every message in INBOX (the Maildir++ folders' files are moved
    into the Inbox's ``cur``; the file names are unique across the corpus).
    """
    server.add_user(USER, PASSWORD)
    target = server.maildir(USER)
    shutil.copytree(corpus, target, dirs_exist_ok=True)
    if one_folder:
        for folder in [p for p in target.iterdir() if p.name.startswith(".") and p.is_dir()]:
            for sub in ("cur", "new"):
                if (folder / sub).is_dir():
                    for path in (folder / sub).iterdir():
                        path.rename(target / sub / path.name)
            shutil.rmtree(folder)
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
    start, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.Popen(
        ["mbsync", "-q", "-c", str(config), "-a"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    tree = TreeCPU(proc.pid)
    _out, err = proc.communicate()
    seconds, cpu = time.perf_counter() - start, children_cpu() - cpu
    tree_cpu = tree.stop()
    if proc.returncode != 0:
        raise SystemExit(f"mbsync failed ({proc.returncode}): {err.strip()}")
    pulled = sum(count(p) for p in local.iterdir() if p.is_dir() and (p / "cur").is_dir())
    return {"seconds": seconds, "cpu_s": round(cpu, 2), "tree_cpu_s": tree_cpu, "messages": pulled}


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


def _last_json(output: str) -> str:
    """The last JSON line a child printed (py-spy adds its own lines)."""
    return [line for line in output.splitlines() if line.startswith("{")][-1]


PROFILE_IDLE = False  # --py-spy-idle: also sample threads that wait (lock, socket, pipe)


def _profiled(command: list[str], profile: Path | None) -> list[str]:
    """``command`` under py-spy (collapsed stacks of every process, for grep or flame graphs)."""
    if profile is None:
        return command
    spy = str(Path(sys.executable).with_name("py-spy"))
    idle = ["--idle"] if PROFILE_IDLE else []
    record = [spy, "record", "-s", *idle, "-r", "200", "-f", "raw", "-o", str(profile)]
    return [*record, "--", *command]


def run_mailroom(
    server: DovecotServer, scratch: Path, database_url: str | None, profile: Path | None = None
) -> dict[str, float]:
    """Sync + import the mailbox into a fresh store in a child process."""
    data = scratch / "mailroom-data"
    data.mkdir()
    script = scratch / "mailroom_child.py"  # a file, so profiles name the process plainly
    script.write_text(CHILD)
    command = [
        sys.executable,
        str(script),
        server.host,
        str(server.port),
        USER,
        PASSWORD,
        database_url or "",
        str(data),
    ]
    cpu = children_cpu()
    done = subprocess.run(_profiled(command, profile), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mailroom failed:\n{done.stderr[-4000:]}")
    result: dict[str, float] = json.loads(_last_json(done.stdout))
    result["cpu_s"] = round(children_cpu() - cpu, 2)
    return result


def _drain(fd: int, sink: bytearray) -> None:
    """Read a pseudo-terminal's output until it closes (the progress bar needs a reader)."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        sink.extend(chunk)


def run_cli(
    server: DovecotServer,
    scratch: Path,
    database_url: str | None,
    *,
    tty: bool = False,
    profile: Path | None = None,
) -> dict[str, float]:
    """``mailroom sync bench --until-imported`` on a fresh data dir, timed as a subprocess.

    The data dir, the master key and the account are made first with the CLI
    (``keys init``, ``account add imap``), untimed.
    """
    data = scratch / f"cli-data-{time.monotonic_ns()}"
    data.mkdir()
    mailroom = str(Path(sys.executable).with_name("mailroom"))
    env = {
        **os.environ,
        "MAILROOM_DATA_DIR": str(data),
        "MAILROOM_MASTER_KEY_FILE": str(scratch / f"{data.name}.key"),
        "MAILROOM_ALLOWED_PRIVATE_HOSTS": server.host,
    }
    if database_url:
        env["MAILROOM_DATABASE_URL"] = database_url
    env.pop("MAILROOM_MASTER_KEY", None)

    def cli(*args: str, stdin: str | None = None) -> None:
        done = subprocess.run(
            [mailroom, *args], input=stdin, env=env, cwd=data, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"mailroom {' '.join(args)} failed:\n{done.stderr[-4000:]}")

    cli("keys", "init")
    cli(
        "account", "add", "imap", "--name", "bench", "--host", server.host,
        "--port", str(server.port), "--tls", "none", "--login", USER, "--password-stdin",
        stdin=PASSWORD + "\n",
    )  # fmt: skip
    command = _profiled([mailroom, "sync", "bench", "--until-imported"], profile)
    output = bytearray()
    start, cpu = time.perf_counter(), children_cpu()
    if tty:
        import pty
        import threading

        leader, follower = pty.openpty()
        reader = threading.Thread(target=_drain, args=(leader, output), daemon=True)
        reader.start()
        proc = subprocess.Popen(
            command, env=env, cwd=data, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
        )
        tree = TreeCPU(proc.pid)
        os.close(follower)
        code = proc.wait()
        seconds = time.perf_counter() - start
        reader.join(timeout=5)
        os.close(leader)
    else:
        proc = subprocess.Popen(
            command,
            env=env,
            cwd=data,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        tree = TreeCPU(proc.pid)
        out, _err = proc.communicate()
        seconds = time.perf_counter() - start
        code = proc.returncode
        output.extend(out)
    tree_cpu = tree.stop()
    if code != 0:
        raise SystemExit(
            f"mailroom sync failed ({code}):\n{output[-4000:].decode(errors='replace')}"
        )
    cpu = children_cpu() - cpu
    stored = _stored(database_url or f"sqlite:///{data}/mailroom.sqlite3")
    return {"seconds": seconds, "cpu_s": round(cpu, 2), "tree_cpu_s": tree_cpu, "messages": stored}


def _stored(url: str) -> int:
    """Messages in a store (read after the command, untimed)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as connection:
        stored = int(connection.execute(text("SELECT count(*) FROM messages")).scalar_one())
    engine.dispose()
    return stored


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
    result: dict[str, float] = json.loads(_last_json(done.stdout))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--skip-mbsync", action="store_true")
    parser.add_argument("--no-breakdown", action="store_true")
    parser.add_argument("--one-folder", action="store_true", help="the whole corpus in INBOX")
    parser.add_argument("--cli", action="store_true", help="time `mailroom sync --until-imported`")
    parser.add_argument("--tty", action="store_true", help="the CLI on a pseudo-terminal")
    parser.add_argument("--repeat", type=int, default=1, help="alternate the tools N times")
    parser.add_argument(
        "--py-spy", type=Path, default=None, help="profile mailroom into this file (raw)"
    )
    parser.add_argument(
        "--py-spy-idle",
        action="store_true",
        help="with --py-spy: sample waiting threads too (where the importer waits)",
    )
    args = parser.parse_args()
    global PROFILE_IDLE
    PROFILE_IDLE = args.py_spy_idle
    if args.database_url and args.repeat > 1:
        parser.error("--repeat needs a fresh store per run: SQLite only")
    corpus = ensure_corpus(args.copies)
    case = "one folder" if args.one_folder else "two folders"
    how = "CLI" if args.cli else "in-process"
    runs: dict[str, list[float]] = {"mbsync": [], "mailroom": []}
    cpu: dict[str, list[float]] = {"mbsync": [], "mailroom": []}
    tree_cpu: dict[str, list[float]] = {"mbsync": [], "mailroom": []}
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mailroom-imap-bench-") as tmp:
        scratch = Path(tmp)
        with DovecotServer(scratch / "server") as server:
            served = load_mailbox(server, corpus, one_folder=args.one_folder)
            print(json.dumps({"tool": "dovecot", "messages": served, "case": case}), flush=True)
            for run in range(1, args.repeat + 1):
                if not args.skip_mbsync:
                    mbsync_scratch = scratch / f"mbsync-{run}"
                    mbsync_scratch.mkdir()
                    result = run_mbsync(server, mbsync_scratch)
                    runs["mbsync"].append(result["seconds"])
                    cpu["mbsync"].append(result["cpu_s"])
                    tree_cpu["mbsync"].append(result["tree_cpu_s"])
                    print(json.dumps({"tool": "mbsync", "run": run, **result}), flush=True)
                run_scratch = scratch / f"mailroom-{run}"
                run_scratch.mkdir()
                profile = args.py_spy
                if profile is not None and args.repeat > 1:
                    profile = profile.with_name(f"{profile.stem}-{run}{profile.suffix}")
                if args.cli:
                    result = run_cli(
                        server, run_scratch, args.database_url, tty=args.tty, profile=profile
                    )
                else:
                    result = run_mailroom(server, run_scratch, args.database_url, profile)
                runs["mailroom"].append(result["seconds"])
                cpu["mailroom"].append(result["cpu_s"])
                if "tree_cpu_s" in result:
                    tree_cpu["mailroom"].append(result["tree_cpu_s"])
                print(json.dumps({"tool": f"mailroom ({how})", "run": run, **result}), flush=True)
                if runs["mbsync"]:
                    print(
                        f"run {run}: mbsync {runs['mbsync'][-1]:.1f} s, mailroom "
                        f"{runs['mailroom'][-1]:.1f} s "
                        f"({runs['mailroom'][-1] / runs['mbsync'][-1]:.2f}x)",
                        flush=True,
                    )
            if not args.no_breakdown:
                fetch = run_child(FETCH_ONLY, server.host, str(server.port), USER, PASSWORD)
                print(json.dumps({"tool": "imap-fetch-only", **fetch}), flush=True)
                (scratch / "local-data").mkdir()
                source = server.maildir(USER) if args.one_folder else corpus
                local = run_child(
                    LOCAL, str(source), args.database_url or "", str(scratch / "local-data")
                )
                print(json.dumps({"tool": "local-import", **local}), flush=True)
    mailroom = statistics.median(runs["mailroom"])
    if runs["mbsync"]:
        mbsync = statistics.median(runs["mbsync"])
        ratios = sorted(m / b for m, b in zip(runs["mailroom"], runs["mbsync"], strict=True))
        print(
            f"{served} messages, {case}, mailroom {how}: median of {args.repeat}: "
            f"mbsync {mbsync:.1f} s, mailroom {mailroom:.1f} s ({mailroom / mbsync:.2f}x mbsync; "
            f"per-run ratios {', '.join(f'{r:.2f}' for r in ratios)}; target 2x)"
        )
        mbsync_cpu, mailroom_cpu = (
            statistics.median(cpu["mbsync"]),
            statistics.median(cpu["mailroom"]),
        )
        print(
            f"CPU (user + system, waited-for processes of the tool): mbsync {mbsync_cpu:.1f} s, "
            f"mailroom {mailroom_cpu:.1f} s (medians); load {load_start:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end"
        )
        if tree_cpu["mailroom"]:
            print(
                "CPU of every process under the tool (/proc, parse worker included): "
                f"mbsync {statistics.median(tree_cpu['mbsync']):.1f} s, "
                f"mailroom {statistics.median(tree_cpu['mailroom']):.1f} s (medians)"
            )
    else:
        print(f"{served} messages, {case}, mailroom {how}: median {mailroom:.1f} s")


if __name__ == "__main__":
    main()
