"""`mailroom token create --expires`, `token list` and `token revoke` on both stores."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner, Result
from sqlalchemy import update

from mailroom.cli.main import cli
from mailroom.jmap.auth import Authenticator
from mailroom.store.engine import Store
from mailroom.store.models import ApiToken, utcnow


def run(store: Store, tmp_path: Path, *args: str, stdin: str | None = None) -> Result:
    """Run the CLI in process against the test store (it closes its store when done)."""
    url = store.engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(
        cli,
        ["--database-url", url, *args],
        input=stdin,
        env={"MAILROOM_DATA_DIR": str(tmp_path / "data")},
    )


def _user(store: Store, tmp_path: Path) -> None:
    added = run(store, tmp_path, "user", "add", "alice", "--password-stdin", stdin="s3cret\n")
    assert added.exit_code == 0, added.output


def test_tokens_are_listed_with_use_and_expiry_and_revoked(store: Store, tmp_path: Path) -> None:
    """list shows id, name, created, last used and expiry; revoke stops the token at once."""
    _user(store, tmp_path)
    created = run(
        store, tmp_path, "token", "create", "alice", "--name", "phone", "--expires", "90d"
    )
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert token.startswith("mrt_") and "expires on" in created.stderr
    forever = run(store, tmp_path, "token", "create", "alice", "--name", "laptop")
    assert forever.exit_code == 0
    auth = Authenticator(store)
    assert auth.authenticate(f"Bearer {token}") is not None
    listing = run(store, tmp_path, "token", "list", "alice")
    assert listing.exit_code == 0, listing.output
    header, phone, laptop = listing.stdout.strip().splitlines()
    assert header.split() == ["ID", "NAME", "CREATED", "LAST", "USED", "EXPIRES"]
    today = utcnow().strftime("%Y-%m-%d")
    in_90 = (utcnow() + timedelta(days=90)).strftime("%Y-%m-%d")
    assert phone.split()[1] == "phone" and phone.count(today) == 2 and in_90 in phone
    assert laptop.split()[1] == "laptop" and "never" in laptop  # not used, no expiry
    phone_id = phone.split()[0]
    revoked = run(store, tmp_path, "token", "revoke", phone_id)
    assert revoked.exit_code == 0 and revoked.stdout.strip() == f"Token {phone_id} (phone) revoked."
    assert auth.authenticate(f"Bearer {token}") is None
    assert "phone" not in run(store, tmp_path, "token", "list", "alice").stdout


def test_an_expired_token_is_refused_and_listed_as_expired(store: Store, tmp_path: Path) -> None:
    """Once its expiry passes a token no longer authenticates and the list says "expired"."""
    _user(store, tmp_path)
    token = run(store, tmp_path, "token", "create", "alice", "--expires", "12h").stdout.strip()
    with store.session() as session:
        session.execute(update(ApiToken).values(expires_at=utcnow() - timedelta(minutes=1)))
    assert Authenticator(store).authenticate(f"Bearer {token}") is None
    assert "expired " in run(store, tmp_path, "token", "list", "alice").stdout


def test_token_errors_are_one_sentence(store: Store, tmp_path: Path) -> None:
    """A bad --expires, an unknown token id or user get one plain sentence, exit 1."""
    _user(store, tmp_path)
    cases = [
        (("token", "create", "alice", "--expires", "soon"), "12h, 90d or 2w"),
        (("token", "create", "alice", "--expires", "0d"), "not a duration"),
        (("token", "revoke", "999"), "no API token 999"),
        (("token", "list", "nobody"), "no user called 'nobody'"),
    ]
    for args, words in cases:
        result = run(store, tmp_path, *args)
        assert result.exit_code == 1, (args, result.output)
        assert result.stderr.startswith("mailroom: ") and words in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    empty = run(store, tmp_path, "token", "list", "alice")
    assert empty.exit_code == 0 and "no API tokens" in empty.stdout
