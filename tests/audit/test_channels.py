"""The audit log's channels over real connections: SMTP AUTH, and the web settings page."""

from __future__ import annotations

import smtplib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.store.engine import Store
from mailroom.store.models import ApiToken, AuditEntry
from tests.outbound.port_support import PortSetup, client, port_setup
from tests.web.conftest import add_user, browser, csrf_of, sign_in


def _rows(store: Store, prefix: str) -> list[tuple[str, str | None, str, str | None]]:
    with store.session() as session:
        entries = session.scalars(
            select(AuditEntry).where(AuditEntry.action.startswith(prefix)).order_by(AuditEntry.id)
        ).all()
        return [(e.action, e.user_name, e.via, e.origin) for e in entries]


@pytest.fixture
def setup(store: Store, tmp_path: Path) -> Iterator[PortSetup]:
    """The started submission port over me and eve."""
    yield from port_setup(store, tmp_path)


def test_smtp_sign_ins_are_recorded(store: Store, setup: PortSetup) -> None:
    """AUTH on the submission port is recorded as smtp, from the client's address."""
    client(setup).quit()
    host, number = setup.port.address
    with smtplib.SMTP(host, number, timeout=30) as smtp:
        smtp.starttls(context=setup.trust)
        with pytest.raises(smtplib.SMTPAuthenticationError):
            smtp.login("me", "wrong")
    assert _rows(store, "signin.") == [
        ("signin.ok", "me", "smtp", "127.0.0.1"),
        ("signin.failed", "me", "smtp", "127.0.0.1"),
    ]


def test_tokens_made_on_the_web_page_are_recorded_as_web(store: Store, server: str) -> None:
    """Creating and revoking a token on /settings records web and the browser's address."""
    add_user(store, "alice")
    with browser(server) as page:
        assert sign_in(page, server, "alice").status_code == 303
        csrf = csrf_of(page.get("/").text)
        assert (
            page.post("/settings/tokens", data={"csrf": csrf, "name": "phone"}).status_code == 200
        )
        with store.session() as session:
            token_id = session.scalars(select(ApiToken.id)).one()
        revoked = page.post(f"/settings/tokens/{token_id}/revoke", data={"csrf": csrf})
        assert revoked.status_code == 303
    assert _rows(store, "token.") == [
        ("token.create", "alice", "web", "127.0.0.1"),
        ("token.revoke", "alice", "web", "127.0.0.1"),
    ]
