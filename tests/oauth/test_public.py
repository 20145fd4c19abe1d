"""What mailroom.oauth makes public, and the connect commands the registry offers."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

import mailroom.oauth
from mailroom.cli.accounts import account_group
from mailroom.oauth.providers import gmail_add_command, microsoft_add_command
from mailroom.oauth.tokens import TokenSet
from mailroom.providers import registry


def test_the_public_names_are_the_listed_ones_and_load_lazily() -> None:
    """Every name in __all__ resolves; importing the package alone loads no HTTP client."""
    assert sorted(mailroom.oauth.__all__) == sorted(set(mailroom.oauth.__all__))
    for name in mailroom.oauth.__all__:
        assert getattr(mailroom.oauth, name) is not None
    fresh = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, mailroom.oauth.providers; print('httpx' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert fresh.stdout.strip() == "False"


def test_account_add_offers_gmail_and_microsoft() -> None:
    """The registry's gmail and microsoft entries offer the connect commands."""
    assert registry.get("gmail").add_command is gmail_add_command
    assert registry.get("microsoft").add_command is microsoft_add_command
    listing = CliRunner().invoke(account_group, ["add", "--help"])
    commands = listing.output.split("Commands:")[1]
    assert "gmail" in commands and "microsoft" in commands
    helped = CliRunner().invoke(account_group, ["add", "gmail", "--help"])
    assert "--client-secret-file" in helped.output and "--client-id" in helped.output


def test_a_token_set_shows_no_token_in_its_repr() -> None:
    """Tokens cannot reach a log line through repr()."""
    tokens = TokenSet("access-SECRET", refresh_token="refresh-SECRET", id_token="id-SECRET")
    assert "SECRET" not in repr(tokens)
    assert TokenSet.from_json(tokens.as_json()) == tokens
