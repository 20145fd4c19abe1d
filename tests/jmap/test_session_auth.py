"""Session resource and authentication: absolute URLs, honest limits, Basic and bearer."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from mailroom.jmap import auth as auth_module
from mailroom.jmap.auth import (
    Authenticator,
    SignInLimiter,
    create_token,
    hash_password,
    set_password,
    verify_password,
)
from mailroom.jmap.methods.common import SUBMISSION
from mailroom.store.engine import Store
from mailroom.store.models import utcnow
from mailroom.web.app import create_app
from tests.helpers import make_account
from tests.jmap.conftest import CORE, MAIL, PASSWORD, Jmap, Person, Server, serve
from tests.web.conftest import POLICY, Clock


def test_session_has_absolute_urls_capabilities_and_one_account(
    client: Jmap, server: Server, alice: Person
) -> None:
    """The session names Alice's one account as primary, with absolute URLs and the limits."""
    session = client.session
    assert session["username"] == "alice"
    assert session["apiUrl"] == f"{server.base}/jmap/api"
    for key in ("downloadUrl", "uploadUrl", "eventSourceUrl"):
        assert session[key].startswith(f"{server.base}/jmap/")
    for variable in ("{accountId}", "{blobId}", "{name}", "{type}"):
        assert variable in session["downloadUrl"]
    for variable in ("{types}", "{closeafter}", "{ping}"):
        assert variable in session["eventSourceUrl"]
    core = session["capabilities"][CORE]
    assert core["maxCallsInRequest"] > 0 and core["maxObjectsInGet"] > 0
    assert core["maxSizeUpload"] > 0 and core["maxConcurrentUpload"] > 0  # uploads work
    assert list(session["accounts"]) == [alice.jmap_account]
    account = session["accounts"][alice.jmap_account]
    assert account["isPersonal"] and not account["isReadOnly"]
    assert "receivedAt" in account["accountCapabilities"][MAIL]["emailQuerySortOptions"]
    assert session["primaryAccounts"][MAIL] == alice.jmap_account
    assert "urn:mailroom:jmap:tabs" in session["capabilities"]


def test_missing_or_wrong_credentials_are_401_with_challenges(
    server: Server, alice: Person
) -> None:
    """No credentials, a wrong password, an unknown user or token all answer 401."""
    url = f"{server.base}/.well-known/jmap"
    bad = [
        {},
        {"Authorization": "Basic " + base64.b64encode(b"alice:wrong").decode()},
        {"Authorization": "Basic " + base64.b64encode(b"nobody:x").decode()},
        {"Authorization": "Basic not-base64!"},
        {"Authorization": "Bearer mrt_not-a-token"},
        {"Authorization": "Digest whatever"},
    ]
    for headers in bad:
        answer = httpx.get(url, headers=headers)
        assert answer.status_code == 401, headers
        assert "Basic" in answer.headers["www-authenticate"]
        assert "Bearer" in answer.headers["www-authenticate"]
    api = httpx.post(f"{server.base}/jmap/api", json={"using": [CORE], "methodCalls": []})
    assert api.status_code == 401


def test_bearer_token_and_basic_both_work(server: Server, alice: Person) -> None:
    """The API token from `token create` and the password both open the same account."""
    by_token = httpx.get(
        f"{server.base}/.well-known/jmap", headers={"Authorization": f"Bearer {alice.token}"}
    )
    by_password = httpx.get(f"{server.base}/.well-known/jmap", auth=("alice", PASSWORD))
    assert by_token.status_code == by_password.status_code == 200
    assert by_token.json()["state"] == by_password.json()["state"]
    assert _fixed(by_token.json()["accounts"]) == _fixed(by_password.json()["accounts"])


def _fixed(accounts: dict[str, Any]) -> dict[str, Any]:
    """The accounts without FUTURERELEASE's latest date-time, which moves with the clock."""
    for account in accounts.values():
        extensions = account["accountCapabilities"][SUBMISSION]["submissionExtensions"]
        extensions["FUTURERELEASE"] = extensions["FUTURERELEASE"][:1]
    return accounts


def test_changing_the_password_takes_effect_at_once(
    store: Store, server: Server, alice: Person
) -> None:
    """A remembered Basic login stops working as soon as the password is changed."""
    url = f"{server.base}/.well-known/jmap"
    assert httpx.get(url, auth=("alice", PASSWORD)).status_code == 200
    with store.session() as session:
        set_password(session, "alice", "a new secret")
    assert httpx.get(url, auth=("alice", PASSWORD)).status_code == 401
    assert httpx.get(url, auth=("alice", "a new secret")).status_code == 200


def test_password_hashes_are_salted_scrypt() -> None:
    """Hashes are scrypt, differ per call, verify only the right password and reject junk."""
    first, second = hash_password("pw"), hash_password("pw")
    assert first.startswith("scrypt$") and first != second
    assert verify_password("pw", first) and verify_password("pw", second)
    assert not verify_password("PW", first)
    for junk in (None, "", "plain", "scrypt$1$2$3$%%%$%%%", "bcrypt$x"):
        assert not verify_password("pw", junk)


@pytest.fixture
def clock() -> Clock:
    """The sign-in limiter's clock."""
    return Clock()


@pytest.fixture
def locking(store: Store, clock: Clock) -> Iterator[str]:
    """The app with a small lock-out (5 per name, 8 per address) on the test clock."""
    auth = Authenticator(store, SignInLimiter(store, POLICY, clock=clock))
    yield from serve(create_app(store, auth=auth))


def test_basic_failures_answer_429_with_retry_after_until_the_window_passes(
    locking: str, alice: Person, clock: Clock
) -> None:
    """After 5 wrong passwords Basic gets 429 + Retry-After, a token still works; then it clears."""
    url = f"{locking}/.well-known/jmap"
    for _ in range(POLICY.max_failures_per_name):
        assert httpx.get(url, auth=("alice", "wrong")).status_code == 401
    for credentials in (("alice", "wrong"), ("alice", PASSWORD)):
        locked = httpx.get(url, auth=credentials)
        assert locked.status_code == 429
        assert 0 < int(locked.headers["retry-after"]) <= 15 * 60
        assert "Too many failed sign-ins" in locked.json()["detail"]
    api = httpx.post(
        f"{locking}/jmap/api", auth=("alice", PASSWORD), json={"using": [CORE], "methodCalls": []}
    )
    assert api.status_code == 429 and "retry-after" in api.headers
    bearer = {"Authorization": f"Bearer {alice.token}"}
    assert httpx.get(url, headers=bearer).status_code == 200
    clock.advance(POLICY.window + timedelta(seconds=1))
    assert httpx.get(url, auth=("alice", PASSWORD)).status_code == 200


def test_one_address_trying_many_names_is_locked_for_basic(locking: str, alice: Person) -> None:
    """Failures spread over many names from one address lock Basic for every name there."""
    url = f"{locking}/.well-known/jmap"
    for number in range(POLICY.max_failures_per_address):
        assert httpx.get(url, auth=(f"guess{number}", "x")).status_code == 401
    assert httpx.get(url, auth=("alice", PASSWORD)).status_code == 429


def test_unknown_users_cost_one_scrypt_check_like_real_ones(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wrong password, unknown name, user without password: verify_password runs once each."""
    make_account(store, owner="nopassword")
    with store.session() as session:
        set_password(session, "alice", PASSWORD)
    checked: list[str] = []

    def counting(password: str, stored: str | None) -> bool:
        checked.append(password)
        return verify_password(password, stored)

    monkeypatch.setattr(auth_module, "verify_password", counting)
    auth = Authenticator(store)
    for name in ("alice", "nobody", "nopassword"):
        checked.clear()
        assert auth.sign_in(name, f"wrong-{name}") is None
        assert checked == [f"wrong-{name}"], name
    dummy = auth_module._dummy_hash().split("$")
    assert dummy[:4] == ["scrypt", str(auth_module.SCRYPT_N), "8", "1"]


def test_an_expired_token_is_refused(store: Store, server: Server, alice: Person) -> None:
    """A token past its expiry answers 401 like an unknown one; an unexpired one works."""
    with store.session() as session:
        old = create_token(session, "alice", "old", expires_at=utcnow() - timedelta(seconds=1))
        fresh = create_token(session, "alice", "new", expires_at=utcnow() + timedelta(days=1))
    url = f"{server.base}/.well-known/jmap"
    assert httpx.get(url, headers={"Authorization": f"Bearer {old}"}).status_code == 401
    assert httpx.get(url, headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
