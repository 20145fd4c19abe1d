"""Start-up of every read command: whole-process wall time, median of N, with hyperfine.

    python bench/cli_startup.py [--src DIR] [--store DIR] [--runs 10] [--only NAME ...]
                                [--baseline-src OLD_SRC --baseline-store DIR]

Builds a store of its own (once, in ``--store``, default ``bench/.work/cli-store``):
samples/demo-maildir imported, three rules added with the CLI plus one stored
invalid and one switched off, two API tokens (one expiring), two tabs off, and —
written with SQL, as they cannot be made offline — two webhook endpoints (one
disabled) with a dead delivery and one failed send. Then runs each read command
with ``hyperfine -N -w 2 -r RUNS`` (Debian's ``hyperfine``) as
``python -m mailroom`` with ``PYTHONPATH=SRC`` (default this checkout's ``src``;
another tree's ``src`` measures that tree against the same store, which must be
at its schema), byte-code cached (``PYTHONDONTWRITEBYTECODE`` unset, the tree
compiled first), and prints one Markdown row per command: median and mean wall
time, mean user + system CPU. With ``--baseline-src OLD`` (and ``--baseline-store``,
built by that tree) each command of the other tree is timed just before this
tree's, so both see the same load. Reads only its own stores; prints the load
average before and after.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MASTER_KEY = "A" * 43 + "="

# name -> arguments; every command that only reads.
COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "list --limit 20": ["list", "--limit", "20"],
    "list --limit 20 --format jsonl": ["list", "--limit", "20", "--format", "jsonl"],
    "search linux --limit 20": ["search", "linux", "--limit", "20"],
    "show 279": ["show", "279"],
    "explain 1": ["explain", "1"],
    "labels": ["labels"],
    "accounts": ["accounts"],
    "rules list": ["rules", "list"],
    "categories list": ["categories", "list"],
    "token list me": ["token", "list", "me"],
    "outbound failed": ["outbound", "failed"],
    "outbound stats": ["outbound", "stats"],
    "webhooks list": ["webhooks", "list"],
    "webhooks dead": ["webhooks", "dead"],
    "gmail skipped": ["gmail", "skipped"],
    "audit": ["audit"],
    "assistant stats": ["assistant", "stats"],
}

# What cannot be made offline through the CLI (a webhook host must resolve, a send must fail).
EXTRAS = """
insert into rules(user_id, name, conditions, actions, position, enabled, created_at)
  values (1, 'broken', '{"colour": "red"}', '[{"type": "label", "label": "X"}]', 4, 1,
          '2026-12-06 15:10:00');
insert into rules(user_id, name, conditions, actions, position, enabled, created_at)
  values (1, 'sleeping', '{"subject": "zzz"}', '[{"type": "archive"}]', 5, 0,
          '2026-12-06 15:10:00');
insert into webhook_endpoints(user_id, url, secret, events, active, disabled_reason, created_at)
  values (1, 'https://hooks.example.org/mail', x'00', '["messageNew"]', 1, null,
          '2026-12-06 15:10:00');
insert into webhook_endpoints(user_id, url, secret, events, active, disabled_reason, created_at)
  values (1, 'https://gone.example.org/x', x'00', '["messageNew", "messageSent"]', 0,
          'answered 410 Gone', '2026-12-06 15:10:00');
insert into webhook_deliveries(endpoint_id, event_id, event_type, body, state, attempts,
                               next_attempt_at, last_code, last_error, created_at)
  values (1, 'ev1', 'messageNew', '{}', 'dead', 8, '2026-12-06 15:10:00', 503,
          'Service Unavailable', '2026-12-06 15:00:00');
insert into submissions(user_id, account_id, email_id, message_id, message_key, raw_sha256,
                        envelope, lane, state, queued_at, send_at, attempts, deferrals,
                        last_code, last_error, updated_at)
  select 1, 1, id, '<a@x>', 'k1', (select sha256 from blobs limit 1),
         '{"from": "me@x", "to": ["you@y"]}', 'direct', 'failed', '2026-12-06 15:00:00',
         '2026-12-06 15:00:00', 3, 0, 550, 'mailbox unavailable', '2026-12-06 15:05:00'
  from messages limit 1;
insert into failed_sends(submission_id, lane, attempts, code, reason, failed_at)
  values (1, 'direct', 3, 550, '550 5.1.1 mailbox unavailable', '2026-12-06 15:05:00');
"""


def environment(src: Path, store: Path) -> dict[str, str]:
    """The environment of every run: the tree on PYTHONPATH, the store, byte-code cached."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(src), MAILROOM_DATA_DIR=str(store), MAILROOM_MASTER_KEY=MASTER_KEY)
    return env


def mailroom(env: dict[str, str], *args: str) -> None:
    """Run one CLI command that builds the store; stop on failure."""
    subprocess.run(
        [sys.executable, "-m", "mailroom", *args], env=env, check=True, stdout=subprocess.DEVNULL
    )


def build_store(env: dict[str, str], store: Path) -> None:
    """The demo mail with rules, tokens, tabs off, webhooks and a failed send."""
    mailroom(env, "import", str(ROOT / "samples" / "demo-maildir"))
    mailroom(env, "rules", "add", "--subject", "invoice", "--label", "Invoices")
    mailroom(env, "rules", "add", "--from", "news@", "--archive", "--mark-read")
    mailroom(env, "rules", "add", "--list-id", "linux", "--label", "Lists", "--category", "forums")
    mailroom(env, "token", "create", "me", "--name", "laptop")
    mailroom(env, "token", "create", "me", "--name", "phone", "--expires", "90d")
    mailroom(env, "categories", "off", "social")
    mailroom(env, "categories", "off", "promotions")
    with sqlite3.connect(store / "mailroom.sqlite3") as db:
        db.executescript(EXTRAS)


def load() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def timed(commands: list[str], runs: int, env: dict[str, str]) -> list[dict[str, float]]:
    """hyperfine's figures (ms) for each command, run one after the other (-N: no shell)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            ["hyperfine", "-N", "-w", "2", "-r", str(runs), "--export-json", out.name]
            + ["--output", "null", *commands],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        results = json.loads(Path(out.name).read_text())["results"]
    keys = ("median", "mean", "stddev", "user", "system")
    return [{key: result[key] * 1000 for key in keys} for result in results]


def invocation(src: Path, store: Path, args: list[str]) -> str:
    """One run of the CLI of the tree ``src`` on ``store`` (``env`` sets them without a shell)."""
    return " ".join(
        ["env", f"PYTHONPATH={src}", f"MAILROOM_DATA_DIR={store}"]
        + [sys.executable, "-m", "mailroom", *args]
    )


def main() -> None:
    """Build the store(s) if needed, time each command, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    parser.add_argument("--store", type=Path, default=ROOT / "bench" / ".work" / "cli-store")
    parser.add_argument("--baseline-src", type=Path, help="another tree, timed just before")
    parser.add_argument("--baseline-store", type=Path, help="its store (built by that tree)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--only", nargs="*", help="command names (keys of the table) to time")
    options = parser.parse_args()
    trees = [(options.src.resolve(), options.store.resolve())]
    if options.baseline_src is not None:
        baseline_store = options.baseline_store or ROOT / "bench" / ".work" / "cli-store-baseline"
        trees.insert(0, (options.baseline_src.resolve(), baseline_store.resolve()))
    for src, store in trees:
        compileall.compile_dir(src, quiet=1)
        if not (store / "mailroom.sqlite3").exists():
            store.parent.mkdir(parents=True, exist_ok=True)
            build_store(environment(src, store), store)
    env = environment(*trees[-1])
    print(f"load average before: {load()}")
    titles = ["baseline", "this tree"] if len(trees) == 2 else ["this tree"]
    print("| command | " + " | ".join(f"{t}: median / mean ± σ / CPU" for t in titles) + " |")
    print("| --- |" + " --- |" * len(titles))
    for name, args in COMMANDS.items():
        if options.only and name not in options.only:
            continue
        try:
            figures = timed(
                [invocation(src, store, args) for src, store in trees], options.runs, env
            )
        except subprocess.CalledProcessError:  # e.g. a command the baseline tree does not have
            print(f"| `mailroom {name}` | failed in one of the trees |", flush=True)
            continue
        cells = [
            f"{ms['median']:.0f} / {ms['mean']:.0f} ± {ms['stddev']:.0f} / "
            f"{ms['user'] + ms['system']:.0f} ms"
            for ms in figures
        ]
        print(f"| `mailroom {name}` | " + " | ".join(cells) + " |", flush=True)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
