"""`mailroom rules`, `categories`, `backfill categories` and `explain` as a user meets them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from mailroom.cli.main import cli
from tests.factories import make_message
from tests.helpers import write_maildir


def run(*args: str, data_dir: Path) -> Result:
    """Run the CLI in process (quick) with its own data dir."""
    return CliRunner().invoke(cli, list(args), env={"MAILROOM_DATA_DIR": str(data_dir)})


def test_rules_add_list_remove_and_a_clear_error(tmp_path: Path) -> None:
    """A rule is added, listed and removed; an invalid one is one sentence and exit status 1."""
    data = tmp_path / "data"
    added = run(
        "rules", "add", "--from", "news@shop.example", "--label", "Shops", "--archive",
        data_dir=data,
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    assert "Rule 1 added: if from contains 'news@shop.example': label Shops, archive." in (
        added.stdout
    )
    listed = run("rules", "list", "--format", "jsonl", data_dir=data)
    row = json.loads(listed.stdout)
    assert row["conditions"] == {"from": "news@shop.example"}
    assert row["actions"] == [{"type": "label", "label": "Shops"}, {"type": "archive"}]
    bad = run("rules", "add", "--archive", data_dir=data)
    assert bad.exit_code == 1
    assert bad.stderr.strip() == (
        "mailroom: This rule is invalid: a rule needs at least one condition "
        "(from, to, subject, list id, text)."
    )
    bad_tab = run("rules", "add", "--subject", "x", "--category", "junk", data_dir=data)
    assert bad_tab.exit_code == 1 and "'junk' is not a tab" in bad_tab.stderr
    assert "Traceback" not in bad.stderr + bad_tab.stderr
    assert run("rules", "remove", "1", data_dir=data).stdout.strip() == "Rule 1 removed."
    gone = run("rules", "remove", "1", data_dir=data)
    assert gone.exit_code == 1 and gone.stderr.startswith("mailroom: There is no rule 1")


def test_switching_a_tab_off_backfill_and_explain(tmp_path: Path) -> None:
    """Switching Promotions off re-sorts, explain says why, backfill finds nothing left to do."""
    data = tmp_path / "data"
    news = make_message(
        "n@x", subject="Deals", headers={"List-Unsubscribe": "<mailto:out@shop.example>"}
    )
    root = write_maildir(tmp_path / "mail", {"n": news})
    assert run("import", str(root), data_dir=data).exit_code == 0
    explained = run("explain", "1", data_dir=data)
    assert explained.stdout.splitlines()[0] == (
        "Promotions: decided by promotions (list-unsubscribe header)."
    )
    off = run("categories", "off", "promotions", data_dir=data)
    assert off.stdout.strip() == "Promotions is now off; 1 conversations changed tab."
    listing = run("categories", "list", data_dir=data).stdout
    assert "promotions: off" in listing and "forums: on" in listing
    explained = run("explain", "1", data_dir=data).stdout
    assert "Primary: decided by switched_off" in explained and "would be Promotions" in explained
    backfill = run("backfill", "categories", data_dir=data)
    assert backfill.exit_code == 0, backfill.stderr
    assert "0 conversations changed tab" in backfill.stdout
    bad = run("categories", "off", "primary", data_dir=data)
    assert bad.exit_code == 1 and bad.stderr.startswith("mailroom: Primary cannot be switched")
