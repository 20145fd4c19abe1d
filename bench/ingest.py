"""Ingest benchmark: import a Maildir into a fresh store; print messages/s and peak RSS.

    python bench/ingest.py PATH [--database-url URL] [--notmuch] [--repeat N]

With ``--notmuch`` the same Maildir is also indexed by ``notmuch new`` (Debian
package ``notmuch``) into a fresh database in the same run, each in its own
child process so peak RSS is measured per tool.

Memory is the peak of the summed RSS of the importing process and every
process under it (its parse worker and the forkserver that starts it),
sampled every 20 ms from /proc; shared pages count once per process, so the
figure errs high. For notmuch, one process, it is the kernel's exact peak.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def count_messages(path: Path) -> int:
    """Files in cur/ and new/ of the Maildir and its Maildir++ folders."""
    total = 0
    for folder in [path, *(p for p in path.iterdir() if p.name.startswith(".") and p.is_dir())]:
        for sub in ("cur", "new"):
            if (folder / sub).is_dir():
                total += len(os.listdir(folder / sub))
    return total


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (from /proc/PID/task/*/children)."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                found.extend(int(child) for child in children.read().split())
    except OSError:
        pass
    return found


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeMemory:
    """Samples the summed RSS of a process and all its descendants; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid, self.interval, self.peak_kib = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            todo, total = [self.pid], 0
            while todo:
                pid = todo.pop()
                total += _rss_kib(pid)
                todo.extend(_children(pid))
            self.peak_kib = max(self.peak_kib, total)
            time.sleep(self.interval)

    def stop(self) -> float:
        """Stop sampling; the peak in MiB."""
        self._stop.set()
        self._thread.join()
        return self.peak_kib / 1024


def run_mailroom(path: Path, database_url: str | None) -> dict[str, float]:
    """Import in a child process; returns seconds, messages and peak RSS in MiB."""
    with tempfile.TemporaryDirectory(prefix="mailroom-bench-") as data:
        code = (
            "import sys, time, json, resource\n"
            "from pathlib import Path\n"
            "from mailroom.store import open_store\n"
            "from mailroom.providers.local import import_path\n"
            "url = sys.argv[2] or f'sqlite:///{sys.argv[3]}/bench.sqlite3'\n"
            "store = open_store(url)\n"
            "start = time.perf_counter()\n"
            "summary = import_path(store, Path(sys.argv[1]))\n"
            "seconds = time.perf_counter() - start\n"
            "rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
            "print(json.dumps({'seconds': seconds, 'messages': summary.imported,"
            " 'rss_mib': rss, 'failed': len(summary.failed)}))\n"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", code, str(path), database_url or "", data],
            stdout=subprocess.PIPE,
            text=True,
        )
        memory = TreeMemory(child.pid)
        out, _ = child.communicate()
        all_mib = memory.stop()
        if child.returncode != 0:
            raise SystemExit(f"the mailroom import failed (exit status {child.returncode})")
        result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
        result["all_mib"] = max(all_mib, result["rss_mib"])
        return result


def run_notmuch(path: Path) -> dict[str, float]:
    """``notmuch new`` into a fresh database outside the Maildir; seconds and peak RSS."""
    if shutil.which("notmuch") is None:
        raise SystemExit("notmuch is not installed; apt-get install notmuch")
    with tempfile.TemporaryDirectory(prefix="notmuch-bench-") as work:
        (Path(work) / "db").mkdir()
        config = Path(work) / "config"
        config.write_text(
            f"[database]\npath={work}/db\nmail_root={path.resolve()}\n"
            "[user]\nname=bench\nprimary_email=bench@example.org\n"
            "[new]\ntags=\n[maildir]\nsynchronize_flags=false\n"
        )
        env = {**os.environ, "NOTMUCH_CONFIG": str(config)}
        # A fresh child process runs `notmuch new`, so its peak RSS is notmuch's alone.
        # Exit status 1 of notmuch only reports ignored non-mail files (Maildir++ markers).
        code = (
            "import resource, subprocess, sys, time\n"
            "start = time.perf_counter()\n"
            "done = subprocess.run(['notmuch', 'new', '--quiet'], capture_output=True)\n"
            "seconds = time.perf_counter() - start\n"
            "if done.returncode not in (0, 1): sys.exit(done.stderr.decode(errors='replace'))\n"
            "print(seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        )
        measured = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        seconds, rss_kib = float(measured[0]), int(measured[1])
        count = subprocess.run(
            ["notmuch", "count", "*"], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
        return {"seconds": seconds, "messages": int(count), "rss_mib": rss_kib / 1024}


def main() -> None:
    """Parse arguments, run the benchmarks (alternating, ``--repeat`` times), print each run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a Maildir")
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temp dir")
    parser.add_argument("--notmuch", action="store_true", help="also time `notmuch new`")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool (default 1)")
    args = parser.parse_args()
    total = count_messages(args.path)
    print(f"Maildir {args.path}: {total} files")
    ratios: list[float] = []
    for _ in range(args.repeat):
        mine = run_mailroom(args.path, args.database_url)
        rate = mine["messages"] / mine["seconds"]
        print(
            f"mailroom import: {mine['messages']:.0f} messages in {mine['seconds']:.1f} s = "
            f"{rate:.0f} msg/s, peak RSS {mine['all_mib']:.0f} MiB for all its processes "
            f"({mine['rss_mib']:.0f} MiB the importing one), {mine['failed']:.0f} failed"
        )
        if args.notmuch:
            theirs = run_notmuch(args.path)
            their_rate = theirs["messages"] / theirs["seconds"]
            print(
                f"notmuch new:     {theirs['messages']:.0f} messages in "
                f"{theirs['seconds']:.1f} s = {their_rate:.0f} msg/s, "
                f"peak RSS {theirs['rss_mib']:.0f} MiB"
            )
            ratios.append(rate / their_rate)
            print(f"ratio: mailroom is {ratios[-1]:.2f}x notmuch's messages/second")
    if len(ratios) > 1:
        print(
            f"median ratio over {len(ratios)} runs: {statistics.median(ratios):.2f}x "
            f"(lowest {min(ratios):.2f}x, highest {max(ratios):.2f}x)"
        )


if __name__ == "__main__":
    main()
