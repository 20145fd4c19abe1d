"""Owner key rotation on both stores: both versions open meanwhile, batches resume, old key goes."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import select

from mailroom.cli.main import cli
from mailroom.crypto import FieldCipher, MasterKeyWrapper, OwnerKeys
from mailroom.crypto.columns import EncryptedColumn
from mailroom.crypto.fields import from_text, to_text, version_of
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.store.engine import Store
from mailroom.store.models import AuditEntry, KeyRotation, WebhookEndpoint
from tests.crypto.conftest import add_owner

URLS = EncryptedColumn("webhook_endpoints", "url", text=True)


def _add_sealed_urls(store: Store, wrapper: MasterKeyWrapper, owner: int, count: int) -> None:
    with store.session() as session:
        cipher = FieldCipher(OwnerKeys(session, wrapper))
        for n in range(count):
            row = WebhookEndpoint(user_id=owner, url="", events=[])
            session.add(row)
            session.flush()
            url = f"https://hook{n}.example/{owner}"
            row.url = to_text(cipher.encrypt(owner, "webhook_endpoints", "url", row.id, url))


def _versions_and_urls(
    store: Store, wrapper: MasterKeyWrapper, owner: int
) -> tuple[list[int], list[str]]:
    """Each of the owner's values' key version and its decrypted URL, by row id."""
    with store.session() as session:
        cipher = FieldCipher(OwnerKeys(session, wrapper))
        rows = session.scalars(
            select(WebhookEndpoint)
            .where(WebhookEndpoint.user_id == owner)
            .order_by(WebhookEndpoint.id)
        ).all()
        sealed = [(row.id, from_text(row.url)) for row in rows]
        return [version_of(s) for _, s in sealed], [
            cipher.decrypt_text(owner, "webhook_endpoints", "url", i, s) for i, s in sealed
        ]


def test_a_rotation_reencrypts_in_resumable_batches_and_drops_the_old_key(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """After one batch old and new values both open; resuming finishes; only v2 is left."""
    alice, bob = add_owner(store, "alice"), add_owner(store, "bob")
    _add_sealed_urls(store, wrapper, alice, 5)
    _add_sealed_urls(store, wrapper, bob, 2)
    _, plain = _versions_and_urls(store, wrapper, alice)
    with store.session() as session:
        rotation = start_rotation(session, OwnerKeys(session, wrapper), alice)
        assert (rotation.from_version, rotation.to_version) == (1, 2)
        assert start_rotation(session, OwnerKeys(session, wrapper), alice).id == rotation.id
        rotation_id = rotation.id
    rotator = Rotator(store, wrapper, batch=2, columns=[URLS])
    assert rotator.run_batch(rotation_id) is False
    versions, urls = _versions_and_urls(store, wrapper, alice)
    assert versions == [2, 2, 1, 1, 1] and urls == plain  # both versions open meanwhile
    # The process stops here (a kill between batches); a new one resumes from the progress.
    # Two batches finish the first pass, three more make the closing pass that finds nothing.
    assert rotator.run(rotation_id) == 5
    versions, urls = _versions_and_urls(store, wrapper, alice)
    assert versions == [2] * 5 and urls == plain
    assert _versions_and_urls(store, wrapper, bob)[0] == [1, 1]  # other owners untouched
    with store.session() as session:
        assert OwnerKeys(session, wrapper).versions(alice) == [2]
        finished = session.get(KeyRotation, rotation_id)
        assert finished is not None and finished.state == "done"
        assert finished.progress == {URLS.name: -1, "_changed": 0, "_pass": 2, "_search_tokens": -1}
        (entry,) = session.scalars(select(AuditEntry).where(AuditEntry.action == "key.rotate"))
        assert entry.user_name == "alice" and "v1 -> v2" in entry.detail
    assert rotator.run_batch(rotation_id) is True  # a rerun is a no-op


def _start(store: Store, wrapper: MasterKeyWrapper, owner: int) -> int:
    """Start a rotation of ``owner``'s key; its id."""
    with store.session() as session:
        return start_rotation(session, OwnerKeys(session, wrapper), owner).id


def test_values_written_during_a_rotation_are_left_as_they_are(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """A value sealed under the new version while the rotation runs is not re-encrypted."""
    alice = add_owner(store, "alice")
    _add_sealed_urls(store, wrapper, alice, 3)
    rotation_id = _start(store, wrapper, alice)
    _add_sealed_urls(store, wrapper, alice, 1)
    with store.session() as session:
        newest = session.scalars(select(WebhookEndpoint.url).order_by(WebhookEndpoint.id)).all()
    assert version_of(from_text(newest[-1])) == 2
    Rotator(store, wrapper, batch=10, columns=[URLS]).run(rotation_id)
    with store.session() as session:
        after = session.scalars(select(WebhookEndpoint.url).order_by(WebhookEndpoint.id)).all()
    assert after[-1] == newest[-1] and after[:3] != newest[:3]


def test_a_stale_writer_behind_the_pass_is_caught_by_the_closing_pass(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """A unit of work that took version 1 before the rotation and wrote after it is re-encrypted."""
    alice = add_owner(store, "alice")
    _add_sealed_urls(store, wrapper, alice, 2)
    with store.session() as stale:
        stale_cipher = FieldCipher(OwnerKeys(stale, wrapper))
        stale_cipher.lookup_hash(alice, "k", "v")  # it knows version 1 as the newest
        rotation_id = _start(store, wrapper, alice)
        rotator = Rotator(store, wrapper, batch=10, columns=[URLS])
        assert rotator.run_batch(rotation_id) is False  # the first pass is over
        row = WebhookEndpoint(user_id=alice, url="", events=[])
        stale.add(row)
        stale.flush()
        late = stale_cipher.encrypt(alice, "webhook_endpoints", "url", row.id, "https://late/")
        row.url = to_text(late)
        assert version_of(late) == 1
    rotator.run(rotation_id)
    versions, urls = _versions_and_urls(store, wrapper, alice)
    assert versions == [2, 2, 2] and urls[-1] == "https://late/"


def test_the_commands_start_and_resume_a_rotation(store: Store, tmp_path: Path) -> None:
    """rotate-owner adds a version and queues the job; resume finishes it in the foreground
    (no engine running); an unknown user is one line."""
    key = os.urandom(32)
    alice = add_owner(store, "alice")
    with store.session() as session:
        OwnerKeys(session, MasterKeyWrapper(key)).current(alice)
    env = {
        "MAILROOM_DATA_DIR": str(tmp_path / "data"),
        "MAILROOM_MASTER_KEY": base64.urlsafe_b64encode(key).decode(),
    }
    url = store.engine.url.render_as_string(hide_password=False)

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--database-url", url, "keys", *args], env=env)
        assert "Traceback" not in result.output
        return result.output

    assert "version 2; both versions open" in run("rotate-owner", "alice")
    with store.session() as session:
        assert OwnerKeys(session, MasterKeyWrapper(key)).versions(alice) == [1, 2]
    assert "done in 1 batch(es)" in run("resume")
    assert "No owner key rotation is unfinished." in run("resume")
    with store.session() as session:
        assert OwnerKeys(session, MasterKeyWrapper(key)).versions(alice) == [2]
    assert "done in 1 batch(es)" in run("rotate-owner", "alice", "--foreground")
    with store.session() as session:
        assert OwnerKeys(session, MasterKeyWrapper(key)).versions(alice) == [3]
    assert "There is no user called 'nobody'" in run("rotate-owner", "nobody")
