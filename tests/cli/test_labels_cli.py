"""Mail actions from the command line, as a script would use them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import run
from tests.factories import make_message
from tests.helpers import write_maildir


def test_archive_label_snooze_and_labels_listing(tmp_path: Path) -> None:
    """archive, label, snooze and star act on thread ids; `labels` shows the counts."""
    root = write_maildir(
        tmp_path / "mail",
        {"1": make_message("one@x"), "2": make_message("two@x", in_reply_to="one@x")},
    )
    data = tmp_path / "data"
    assert run("import", str(root), data_dir=data).returncode == 0
    (row, _) = [
        json.loads(line)
        for line in run("list", "--format", "jsonl", data_dir=data).stdout.splitlines()
    ]
    thread = str(row["thread_id"])
    done = run("label", "Work/Invoices", thread, data_dir=data)
    assert done.returncode == 0 and "Labelled 1 thread (2 messages changed)" in done.stdout
    assert run("star", thread, data_dir=data).returncode == 0
    assert "Archived 1 thread" in run("archive", thread, data_dir=data).stdout
    rows = [
        json.loads(line)
        for line in run("list", "--format", "jsonl", data_dir=data).stdout.splitlines()
    ]
    assert all("Inbox" not in r["labels"] and "Work/Invoices" in r["labels"] for r in rows)
    snoozed = run("snooze", thread, "--for", "2h", data_dir=data)
    assert snoozed.returncode == 0 and "Snoozed 1 thread(s) until" in snoozed.stdout
    listing = run("labels", data_dir=data).stdout
    assert "Work/Invoices" in listing and "Snoozed" in listing
    bad = run("snooze", thread, "--for", "soon", data_dir=data)
    assert bad.returncode == 1 and bad.stderr.startswith("mailroom: ") and "duration" in bad.stderr
    missing = run("archive", "9999", data_dir=data)
    assert missing.returncode == 1 and "no thread 9999" in missing.stderr
    refused = run("delete", thread, data_dir=data)
    assert refused.returncode == 1 and "--yes" in refused.stderr
