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
from mailroom.crypto.lookup_rotation import PROGRESS_KEY
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.crypto.sealing import MailSealing
from mailroom.store.engine import Store
from mailroom.store.models import AuditEntry, KeyRotation, Message, MessageRef, WebhookEndpoint
from tests.crypto.conftest import add_owner
from tests.factories import make_message
from tests.helpers import ingest, make_account, thread_of_provider

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


def _rotation_mail(mid: str, subject: str, sender: str, to: str, **kw: object) -> bytes:
    return make_message(f"{mid}@rot", subject=subject, sender=sender, to=to, **kw)  # type: ignore[arg-type]


_ALICE, _BOB = "Alice <alice@example.org>", "Bob <bob@example.net>"


def _lookup_columns(store: Store, owner: int) -> dict[str, tuple[object, ...]]:
    """Each message's stored Message-ID, subject key and references, by provider id."""
    with store.session() as session:
        rows = session.execute(
            select(Message.id, Message.provider_id, Message.message_id_header, Message.subject_key)
            .where(Message.user_id == owner)
            .order_by(Message.id)
        ).all()
        refs = session.execute(select(MessageRef.message_id, MessageRef.ref)).all()
    return {
        provider: (header, key, tuple(sorted(r for m, r in refs if m == message_id)))
        for message_id, provider, header, key in rows
    }


def test_replies_thread_onto_sealed_mail_during_and_after_a_rotation(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """The last pass re-hashes sealed Message-IDs, references and subject keys, in resumable
    batches, before the old version goes: replies, replies naming only a shared ancestor and
    replies naming no parent (subject rescue) still find sealed mail stored under version 1."""
    store.sealing = MailSealing(wrapper, seal_new_mail=True)
    account = make_account(store)
    owner = account[0]
    lost = ["lost-root@rot"]  # an ancestor never stored: it ties its replies together
    ingest(
        store,
        account,
        [
            ("p", _rotation_mail("p", "Plan", _ALICE, _BOB)),
            ("q", _rotation_mail("q", "Budget", _ALICE, _BOB, minutes=1)),
            ("k", _rotation_mail("k", "Re: Old", _BOB, _ALICE, minutes=2, references=lost)),
            ("x1", _rotation_mail("x1", "Other one", _BOB, _ALICE, minutes=3)),
            ("x2", _rotation_mail("x2", "Other two", _BOB, _ALICE, minutes=4)),
        ],
    )
    before = _lookup_columns(store, owner)
    rotation_id = _start(store, wrapper, owner)
    # Meanwhile both versions are looked up: a reply stored under version 2 finds its parent.
    ingest(store, account, [("p1", _rotation_mail("p1", "Re: Plan", _BOB, _ALICE, minutes=5,
                                                  in_reply_to="p@rot"))])  # fmt: skip
    assert thread_of_provider(store, owner, "p1") == thread_of_provider(store, owner, "p")
    rotator = Rotator(store, wrapper, batch=2)
    halfway = False
    while not rotator.run_batch(rotation_id):
        with store.session() as session:
            rotation = session.get(KeyRotation, rotation_id)
            assert rotation is not None
            if int(rotation.progress.get(PROGRESS_KEY, 0)) > 0:
                halfway = True  # a kill here resumes after the last batch re-hashed
    assert halfway
    after = _lookup_columns(store, owner)
    with store.session() as session:
        assert OwnerKeys(session, wrapper).versions(owner) == [2]
        rotation = session.get(KeyRotation, rotation_id)
        assert rotation is not None and rotation.progress[PROGRESS_KEY] == -1
        cipher = FieldCipher(OwnerKeys(session, wrapper))
        assert after["p"][0] == cipher.lookup_hash(owner, "message-id", "p@rot")
        assert after["k"][2] == (cipher.lookup_hash(owner, "message-id", "lost-root@rot"),)
        assert after["p1"][2] == (after["p"][0],)  # written under version 2: unchanged
    for provider in ("p", "q", "k", "x1", "x2"):
        assert after[provider] != before[provider]  # every column re-hashed, none left behind
        assert after[provider][1] != before[provider][1]
    assert after["p1"] == _lookup_columns(store, owner)["p1"]

    ingest(
        store,
        account,
        [
            ("p2", _rotation_mail("p2", "Re: Plan", _ALICE, _BOB, minutes=6,
                                  in_reply_to="p@rot")),
            ("q1", _rotation_mail("q1", "AW: Budget", _BOB, _ALICE, minutes=7)),
            ("k1", _rotation_mail("k1", "Re: Old", _ALICE, _BOB, minutes=8, references=lost)),
            ("x3", _rotation_mail("x3", "Re: Other one", _ALICE, _BOB, minutes=9,
                                  in_reply_to="x1@rot")),
        ],
    )  # fmt: skip
    assert thread_of_provider(store, owner, "p2") == thread_of_provider(store, owner, "p")
    assert thread_of_provider(store, owner, "q1") == thread_of_provider(store, owner, "q")
    assert thread_of_provider(store, owner, "k1") == thread_of_provider(store, owner, "k")
    # x3's only parent is x1
    assert thread_of_provider(store, owner, "x3") == thread_of_provider(store, owner, "x1")
    assert len({thread_of_provider(store, owner, p) for p in ("p", "q", "k", "x1", "x2")}) == 5
