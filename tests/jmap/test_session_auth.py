"""Session resource and authentication: absolute URLs, honest limits, Basic and bearer."""

from __future__ import annotations

import base64

import httpx
import pytest

from mailroom.jmap.auth import hash_password, set_password, verify_password
from mailroom.store.engine import Store
from tests.jmap.conftest import CORE, MAIL, PASSWORD, Jmap, Person, Server


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
    assert core["maxSizeUpload"] == 0  # no upload endpoint that anything could use
    assert list(session["accounts"]) == [alice.jmap_account]
    account = session["accounts"][alice.jmap_account]
    assert account["isPersonal"] and not account["isReadOnly"]
    assert account["accountCapabilities"][MAIL]["emailQuerySortOptions"] == ["receivedAt"]
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
    assert by_token.json()["accounts"] == by_password.json()["accounts"]


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


@pytest.mark.parametrize("path", ["/jmap/upload/u1"])
def test_upload_is_refused_plainly(server: Server, alice: Person, path: str) -> None:
    """Uploads answer 403 with a problem document saying why (maxSizeUpload is 0)."""
    answer = httpx.post(f"{server.base}{path}", content=b"x", auth=("alice", PASSWORD))
    assert answer.status_code == 403
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert "upload" in answer.json()["detail"]
