"""`mailroom serve --owner` no longer chooses whose mail the page shows."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from mailroom.cli.main import cli


def test_owner_is_hidden_but_still_accepted(tmp_path: Path) -> None:
    """--owner is gone from the help and old scripts passing it fail only on their real error."""
    env = {"MAILROOM_DATA_DIR": str(tmp_path / "data")}
    helped = CliRunner().invoke(cli, ["serve", "--help"], env=env)
    assert helped.exit_code == 0 and "--owner" not in helped.output
    old = CliRunner().invoke(cli, ["serve", "--owner", "me", "--tls-cert", "x.pem"], env=env)
    assert old.exit_code == 1 and "No such option" not in old.output
    assert "--tls-key" in old.stderr
