"""The provider contract: behaviours every mail provider must show, written once.

:class:`ProviderContract` holds the tests; a provider's test module subclasses it
(``class TestImapContract(ProviderContract)``) and defines one fixture,
``harness``, returning a :class:`Harness` for a fresh account on the ``store``
fixture (so every test runs on SQLite and on PostgreSQL). The tests drive the
provider only through the registry (``registry.syncer_for`` /
``importer_for`` / ``propagator_for`` by ``Account.provider``), exactly as the
jobs and ``mailroom sync`` do, and look at the result only in the store and
through the harness's view of the provider.

What is held to the contract:

* **exactly once** — the same fetch twice, and two fetches at the same time,
  store each message once;
* **moves re-locate** — a message moved at the provider keeps its message id
  and is found in its new folder (and, with ``removal``, no longer in the old);
* **pending local changes win** — a local star not yet propagated survives a
  fetch in which the provider reports the message unflagged;
* **propagation is idempotent** — propagating, then replaying the same pending
  changes, leaves the provider as it was, without an error;
* **errors map to the right status** — refused credentials end in
  ``auth_error`` with a reason; an unreachable provider leaves the account
  active with a reason and a retry (:func:`mailroom.providers.errors.account_outcome`).
* **folders follow the labels** — a user label created, renamed or moved,
  and destroyed in mailroom (:class:`~mailroom.labels.lifecycle.LabelLifecycle`,
  what ``Mailbox/set`` calls) becomes, moves with and leaves a provider
  folder once propagated; the next fetch finds the same label, never a second
  one; replaying the folder changes alters nothing.

Plugging in a provider (Gmail, Graph): write a :class:`Harness` subclass over
the provider's emulator — ``put`` a message (Message-ID ``<key@x>``) into a
folder (for Gmail: a label), ``move`` it, ``mark_seen`` it, report
``provider_flagged``, ``break_auth`` (revoke the token) and
``break_connection`` (stop the emulator or point the account elsewhere) and
list ``provider_folders`` (paths joined by ``/``; for Gmail: label names) — set
``provider`` to the registered name, list in ``lacks`` each capability the
provider does not have (``propagation``, ``auth``, ``unreachable``,
``removal``, ``concurrent``, ``folders``) with the reason, and add
``tests/providers/test_<name>_contract.py`` with the ``harness`` fixture and
an empty subclass of :class:`ProviderContract`. A capability in ``lacks`` makes
its tests skip with that reason (visible in ``pytest -rs``), never pass
silently. Folder names used here are ``INBOX`` and ``Archive``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar

import pytest
from sqlalchemy import select, update

from mailroom.config import Settings
from mailroom.errors import ProviderError
from mailroom.jobs.status import record_failure
from mailroom.labels.lifecycle import LabelLifecycle
from mailroom.labels.operations import Operations
from mailroom.labels.propagation import PropagationRun, propagate_pending
from mailroom.labels.resolver import system_label
from mailroom.providers import registry
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.errors import account_outcome
from mailroom.store.engine import Store
from mailroom.store.models import (
    Account,
    Folder,
    Label,
    Message,
    MessageLabel,
    MessageLocation,
    PendingChange,
)

__all__ = ["CAPABILITIES", "Harness", "ProviderContract"]

CAPABILITIES = ("propagation", "auth", "unreachable", "removal", "concurrent", "folders")


class Harness:
    """One provider account under test: how to act at the provider, and the shared moves.

    Subclasses implement the provider side (the methods that raise
    ``NotImplementedError``); ``fetch``, ``propagate`` and the store views are
    shared and go through the registry.
    """

    provider: ClassVar[str]
    lacks: ClassVar[dict[str, str]] = {}  # capability -> why this provider lacks it

    def __init__(self, store: Store, settings: Settings | None, account_id: int) -> None:
        self.store = store
        self.settings = settings
        self.account_id = account_id

    # -- the provider side (per provider) ------------------------------------------

    def put(self, key: str, folder: str = "INBOX") -> None:
        """Deliver a new message with Message-ID ``<key@x>`` into ``folder``, unflagged."""
        raise NotImplementedError

    def move(self, key: str, folder: str) -> None:
        """Move the message to ``folder`` at the provider (behind mailroom's back)."""
        raise NotImplementedError

    def mark_seen(self, key: str) -> None:
        """Mark the message read at the provider, leaving it unflagged."""
        raise NotImplementedError

    def provider_flagged(self, key: str) -> bool:
        """Whether the provider holds the message as flagged (starred)."""
        raise NotImplementedError

    def break_auth(self) -> None:
        """Make the provider refuse the account's credentials from now on."""
        raise NotImplementedError

    def break_connection(self) -> None:
        """Make the provider unreachable for the account from now on."""
        raise NotImplementedError

    def provider_folders(self) -> set[str]:
        """The provider's folders of the account, nested names joined by ``/``."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------

    def require(self, capability: str) -> None:
        """Skip the calling test, with the reason, when the provider lacks ``capability``."""
        assert capability in CAPABILITIES, capability
        if capability in self.lacks:
            pytest.skip(f"{self.provider} lacks {capability}: {self.lacks[capability]}")

    def fetch(self) -> None:
        """What a scheduler tick does: sync, then import until no history is left."""
        syncer = registry.syncer_for(self.store, self.provider, self.settings)
        if syncer is not None:
            syncer.sync(self.account_id)
        importer = registry.importer_for(self.store, self.provider, self.settings)
        if importer is None:
            return
        try:
            for _page in range(1000):
                if not importer.import_page(self.account_id):
                    return
            raise AssertionError("the import does not end")
        finally:
            importer.close()

    def propagate(self) -> PropagationRun:
        """Carry the due pending changes through the provider's registered propagator."""
        propagator = registry.propagator_for(self.store, self.provider, self.settings)
        assert propagator is not None, f"{self.provider} registers no propagator"
        return propagate_pending(self.store, self.account_id, propagator)

    def replay(self) -> None:
        """Make every pending change of the account due again, as after a crash."""
        with self.store.session() as session:
            session.execute(
                update(PendingChange)
                .where(PendingChange.account_id == self.account_id)
                .values(state="pending", done_at=None, attempts=0)
            )

    @property
    def user_id(self) -> int:
        """The owner of the account."""
        with self.store.session() as session:
            return session.scalars(
                select(Account.user_id).where(Account.id == self.account_id)
            ).one()

    def stored(self) -> dict[str, int]:
        """Message key → message id of the account's stored messages (each key once)."""
        with self.store.session() as session:
            rows = session.execute(
                select(Message.message_id_header, Message.id).where(
                    Message.account_id == self.account_id
                )
            ).all()
        keys = [str(header).removesuffix("@x") for header, _id in rows]
        assert len(set(keys)) == len(keys), f"a message is stored twice: {sorted(keys)}"
        return {key: message_id for key, (_h, message_id) in zip(keys, rows, strict=True)}

    def folders_of(self, key: str) -> set[str]:
        """The provider folders the store locates the message in."""
        message_id = self.stored()[key]
        with self.store.session() as session:
            return set(
                session.scalars(
                    select(Folder.path)
                    .join(MessageLocation, MessageLocation.folder_id == Folder.id)
                    .where(MessageLocation.message_id == message_id)
                )
            )

    def starred(self, key: str) -> bool:
        """Whether the stored message carries the Starred label."""
        message_id = self.stored()[key]
        with self.store.session() as session:
            label = system_label(session, self.user_id, "starred").id
            found = session.scalar(
                select(MessageLabel.message_id).where(
                    MessageLabel.message_id == message_id, MessageLabel.label_id == label
                )
            )
        return found is not None

    def star_locally(self, key: str) -> None:
        """Star the message in mailroom (a label change plus a pending change)."""
        message_id = self.stored()[key]
        with self.store.session() as session:
            Operations(session, self.user_id).star([message_id])

    def labels(self, name: str) -> list[int]:
        """The ids of the user's labels with this name."""
        with self.store.session() as session:
            return list(
                session.scalars(
                    select(Label.id).where(Label.user_id == self.user_id, Label.name == name)
                )
            )

    def change_label(self, change: Callable[[LabelLifecycle], object]) -> None:
        """Create, change or destroy a label in mailroom, as ``Mailbox/set`` does."""
        with self.store.session() as session:
            change(LabelLifecycle(session, self.user_id))

    def status(self) -> tuple[str, str | None]:
        """The account's status and reason."""
        with self.store.session() as session:
            row = session.execute(
                select(Account.status, Account.status_reason).where(Account.id == self.account_id)
            ).one()
        return row[0], row[1]


class ProviderContract:
    """The contract tests; subclass with a ``harness`` fixture (see the module docstring)."""

    def test_the_same_fetch_twice_stores_each_message_once(self, harness: Harness) -> None:
        """Fetching again what was already fetched creates nothing and keeps every id."""
        for key in ("a", "b", "c"):
            harness.put(key)
        harness.fetch()
        first = harness.stored()
        harness.fetch()
        assert harness.stored() == first and sorted(first) == ["a", "b", "c"]

    def test_overlapping_fetches_store_each_message_once(self, harness: Harness) -> None:
        """Two fetches at the same time (two workers) store each message exactly once."""
        harness.require("concurrent")
        for i in range(6):
            harness.put(f"m{i}")
        errors: list[BaseException] = []

        def run() -> None:
            try:
                harness.fetch()
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
        harness.fetch()  # whatever one of them left is picked up, still once
        assert sorted(harness.stored()) == [f"m{i}" for i in range(6)]

    def test_a_move_relocates_the_message_instead_of_creating_it_again(
        self, harness: Harness
    ) -> None:
        """A message moved at the provider keeps its id and is found in its new folder."""
        harness.put("moving")
        harness.put("staying")
        harness.fetch()
        before = harness.stored()
        harness.move("moving", "Archive")
        harness.fetch()
        assert harness.stored() == before
        assert "Archive" in harness.folders_of("moving")
        assert harness.folders_of("staying") == {"INBOX"}

    def test_a_moved_message_leaves_its_old_folder(self, harness: Harness) -> None:
        """After a move the store no longer locates the message where it was."""
        harness.require("removal")
        harness.put("moving")
        harness.fetch()
        harness.move("moving", "Archive")
        harness.fetch()
        assert harness.folders_of("moving") == {"Archive"}

    def test_a_pending_local_star_survives_a_fetch_that_sees_it_unflagged(
        self, harness: Harness
    ) -> None:
        """A star not yet carried to the provider is not reverted by the provider's older view."""
        harness.put("starred")
        harness.fetch()
        harness.star_locally("starred")
        harness.mark_seen("starred")  # the provider reports the message again, unflagged
        harness.fetch()
        assert harness.starred("starred")

    def test_a_propagated_star_reaches_the_provider_and_stays(self, harness: Harness) -> None:
        """Once carried, the star is the provider's too, and the next fetch keeps it."""
        harness.require("propagation")
        harness.put("starred")
        harness.fetch()
        harness.star_locally("starred")
        harness.mark_seen("starred")
        run = harness.propagate()
        assert run.failed == 0 and run.done >= 1
        harness.fetch()
        assert harness.starred("starred") and harness.provider_flagged("starred")

    def test_propagation_is_idempotent(self, harness: Harness) -> None:
        """Propagating, then replaying the same changes, leaves the provider as it was."""
        harness.require("propagation")
        harness.put("p")
        harness.fetch()
        harness.star_locally("p")
        first = harness.propagate()
        assert first.failed == 0 and first.done >= 1
        assert harness.provider_flagged("p")
        harness.replay()
        again = harness.propagate()
        assert again.failed == 0 and again.retried == 0
        assert harness.provider_flagged("p")
        harness.fetch()
        assert harness.starred("p") and sorted(harness.stored()) == ["p"]

    def test_refused_credentials_end_in_auth_error_with_a_reason(self, harness: Harness) -> None:
        """A bad password is an AuthError that maps to ``auth_error``, no retry, and a reason."""
        harness.require("auth")
        harness.put("x")
        harness.break_auth()
        with pytest.raises(AuthError) as info:
            harness.fetch()
        outcome = account_outcome(info.value)
        assert outcome.status == "auth_error" and not outcome.retry and outcome.reason
        record_failure(harness.store, harness.account_id, info.value)
        status, reason = harness.status()
        assert status == "auth_error" and reason

    def test_an_unreachable_provider_is_retried_and_the_account_stays_active(
        self, harness: Harness
    ) -> None:
        """A provider out of reach is a TransientError: status unchanged, a reason, a retry."""
        harness.require("unreachable")
        harness.break_connection()
        with pytest.raises(ProviderError) as info:
            harness.fetch()
        assert isinstance(info.value, TransientError)
        outcome = account_outcome(info.value)
        assert outcome.status is None and outcome.retry and outcome.reason
        record_failure(harness.store, harness.account_id, info.value)
        status, reason = harness.status()
        assert status == "active" and reason

    def test_a_label_created_in_mailroom_becomes_one_provider_folder(
        self, harness: Harness
    ) -> None:
        """A new label and its child become folders; the next fetch binds them, no second label."""
        harness.require("folders")
        harness.put("a")
        harness.fetch()
        harness.change_label(lambda life: life.create("Child", life.create("Projects").id))
        run = harness.propagate()
        assert run.failed == 0 and run.retried == 0 and run.done == 2
        assert {"Projects", "Projects/Child"} <= harness.provider_folders()
        harness.fetch()
        assert len(harness.labels("Projects")) == 1 and len(harness.labels("Child")) == 1

    def test_a_renamed_and_moved_label_moves_its_provider_folder(self, harness: Harness) -> None:
        """Renaming a parent and moving a child carry the folders along, labels unchanged."""
        harness.require("folders")
        harness.fetch()
        harness.change_label(lambda life: life.create("Old").id)
        harness.change_label(lambda life: life.create("Home").id)
        (old,), (home,) = harness.labels("Old"), harness.labels("Home")
        harness.change_label(lambda life: life.create("Leaf", old))
        harness.propagate()
        harness.change_label(lambda life: life.update(old, name="New"))
        assert harness.propagate().failed == 0
        assert "New/Leaf" in harness.provider_folders()
        assert "Old" not in harness.provider_folders()
        (leaf,) = harness.labels("Leaf")
        harness.change_label(lambda life: life.update(leaf, parent_id=home))
        assert harness.propagate().failed == 0
        folders = harness.provider_folders()
        assert "Home/Leaf" in folders and "New/Leaf" not in folders
        harness.fetch()
        assert harness.labels("New") == [old] and harness.labels("Leaf") == [leaf]
        assert harness.labels("Old") == []

    def test_a_destroyed_label_deletes_its_provider_folder(self, harness: Harness) -> None:
        """A destroyed label's folder disappears, and the next fetch does not bring it back."""
        harness.require("folders")
        harness.fetch()
        harness.change_label(lambda life: life.create("Brief"))
        harness.propagate()
        assert "Brief" in harness.provider_folders()
        (brief,) = harness.labels("Brief")
        harness.change_label(lambda life: life.destroy(brief))
        assert harness.propagate().failed == 0
        assert "Brief" not in harness.provider_folders()
        harness.fetch()
        assert harness.labels("Brief") == []

    def test_folder_changes_are_idempotent(self, harness: Harness) -> None:
        """Replaying created, renamed and destroyed folders changes nothing and fails nothing."""
        harness.require("folders")
        harness.fetch()
        harness.change_label(lambda life: life.create("Twice"))
        harness.change_label(lambda life: life.create("Gone"))
        (twice,), (gone,) = harness.labels("Twice"), harness.labels("Gone")
        harness.change_label(lambda life: life.update(twice, name="Thrice"))
        harness.change_label(lambda life: life.destroy(gone))
        first = harness.propagate()
        assert first.failed == 0 and first.retried == 0
        before = harness.provider_folders()
        assert "Thrice" in before and "Twice" not in before and "Gone" not in before
        harness.replay()
        again = harness.propagate()
        assert again.failed == 0 and again.retried == 0
        assert harness.provider_folders() == before

    def test_a_fetch_before_the_propagation_keeps_the_new_name(self, harness: Harness) -> None:
        """A fetch that still sees the old folder neither revives its name nor loses the label."""
        harness.require("folders")
        harness.fetch()
        harness.change_label(lambda life: life.create("Before"))
        harness.change_label(lambda life: life.create("Doomed"))
        harness.propagate()
        (label,), (doomed,) = harness.labels("Before"), harness.labels("Doomed")
        harness.change_label(lambda life: life.update(label, name="After"))
        harness.change_label(lambda life: life.destroy(doomed))
        harness.fetch()  # the provider still has "Before" and "Doomed"
        assert harness.labels("Before") == [] and harness.labels("After") == [label]
        assert harness.labels("Doomed") == []
        assert harness.propagate().failed == 0
        folders = harness.provider_folders()
        assert "After" in folders and not {"Before", "Doomed"} & folders
        harness.fetch()
        assert harness.labels("After") == [label] and harness.labels("Doomed") == []

    def test_destroying_a_label_with_its_messages_empties_the_provider(
        self, harness: Harness
    ) -> None:
        """A label destroyed with its messages takes its folder and the mail only there along."""
        harness.require("folders")
        harness.put("kept")
        harness.fetch()
        harness.change_label(lambda life: life.create("Brief"))
        harness.propagate()
        harness.put("only", folder="Brief")
        harness.fetch()
        (brief,) = harness.labels("Brief")
        harness.change_label(lambda life: life.destroy(brief, remove_messages=True))
        run = harness.propagate()
        assert run.failed == 0 and run.retried == 0
        assert "Brief" not in harness.provider_folders()
        harness.fetch()
        assert sorted(harness.stored()) == ["kept"] and harness.labels("Brief") == []
