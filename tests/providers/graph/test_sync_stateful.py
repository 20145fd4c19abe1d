"""Issue 17 "Must show": random moves, deletes, read/flag changes and expired delta links,
interleaved with syncs and local actions, end with the mirror equal to the emulator.

A hypothesis state machine acts on a fresh emulated mailbox per example (both
stores): at Graph it adds, moves (each move gives a new REST id; mailroom reads
immutable ids), deletes, marks read, flags and expires delta links; in mailroom
it stars messages (pending changes) and propagates. After every fetch:
nothing is doubled, no message is in two locations, every message is where
Graph has it, and no local star not yet propagated is reverted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.labels.operations import Operations
from mailroom.labels.resolver import system_label
from mailroom.store.engine import Store
from mailroom.store.models import Account, Folder, Message, MessageLabel, MessageLocation
from tests.emulators.graph.server import GraphEmulator
from tests.providers.graph.test_propagation import propagate
from tests.providers.test_graph_contract import add_graph_account, fetch, raw

FOLDERS = ("inbox", "archive", "deleteditems")
PLACE = {"inbox": "Inbox", "archive": "Archive", "deleteditems": "Deleted Items"}
_mailboxes = itertools.count()
PICK = st.integers(min_value=0, max_value=50)


def chosen(keys: Iterable[str], pick: int) -> str:
    """The ``pick``-th key (modulo), so every rule draws the same whatever the state."""
    ordered = sorted(keys)
    return ordered[pick % len(ordered)]


def test_random_histories_end_with_the_mirror_equal_to_graph(
    store: Store, settings: Settings, graph_emulator: GraphEmulator
) -> None:
    """The state machine below, a few short histories per store."""
    config = settings

    class History(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            number = next(_mailboxes)
            self.address = f"u{number}@example.com"
            graph_emulator.add_mailbox(self.address)
            self.account = add_graph_account(
                store, config, graph_emulator, owner=f"o{number}", address=self.address
            )
            self.keys: dict[str, str] = {}  # key -> immutable id
            self.where: dict[str, str] = {}  # key -> well-known folder
            self.local_stars: set[str] = set()  # starred in mailroom, not yet propagated
            self.made = itertools.count()
            self.fetched = False

        @property
        def mailbox(self):  # type: ignore[no-untyped-def]
            return graph_emulator.mailbox(self.address)

        @rule(folder=st.sampled_from(FOLDERS))
        def deliver(self, folder: str) -> None:
            key = f"k{next(self.made)}"
            message = graph_emulator.add_message(raw(key), folder, address=self.address)
            self.keys[key], self.where[key] = message.immutable_id, folder

        @rule(pick=PICK, folder=st.sampled_from(FOLDERS))
        def move(self, pick: int, folder: str) -> None:
            if self.keys:
                key = chosen(self.keys, pick)
                graph_emulator.move_message(self.keys[key], folder, address=self.address)
                self.where[key] = folder

        @rule(pick=PICK)
        def delete(self, pick: int) -> None:
            left = [k for k in self.keys if k not in self.local_stars]
            if left:
                key = chosen(left, pick)
                graph_emulator.delete_message(self.keys.pop(key), address=self.address)
                del self.where[key]

        @rule(pick=PICK, read=st.booleans(), flagged=st.booleans())
        def change_flags(self, pick: int, read: bool, flagged: bool) -> None:
            if self.keys:
                key = chosen(self.keys, pick)
                graph_emulator.mark_read(self.keys[key], read, address=self.address)
                status = "flagged" if flagged else "notFlagged"
                graph_emulator.flag(self.keys[key], status, address=self.address)

        @rule()
        def expire_links(self) -> None:
            graph_emulator.expire_delta_tokens(None, address=self.address)

        @rule()
        def sync(self) -> None:
            fetch(store, config, self.account)
            self.fetched = True
            self.check()

        @rule(pick=PICK)
        def star_locally(self, pick: int) -> None:
            stored = self.stored()
            if stored:
                key = chosen(stored, pick)
                with store.session() as session:
                    Operations(session, self.user()).star([stored[key]])
                self.local_stars.add(key)

        @rule()
        def carry(self) -> None:
            run = propagate(store, config, self.account)
            assert run.failed == 0
            for key in self.local_stars:
                if key in self.keys:
                    assert self.mailbox.message(self.keys[key]).flag_status == "flagged"
            self.local_stars.clear()

        def user(self) -> int:
            with store.session() as session:
                return session.scalars(
                    select(Account.user_id).where(Account.id == self.account)
                ).one()

        def stored(self) -> dict[str, int]:
            with store.session() as session:
                rows = session.execute(
                    select(Message.message_id_header, Message.id).where(
                        Message.account_id == self.account
                    )
                ).all()
            keys = [str(h).removesuffix("@x") for h, _ in rows]
            assert len(keys) == len(set(keys)), f"doubled: {sorted(keys)}"
            return {str(h).removesuffix("@x"): mid for h, mid in rows}

        def check(self) -> None:
            stored = self.stored()
            assert set(stored) == set(self.keys) | (set(stored) & self.local_stars)
            with store.session() as session:
                starred = system_label(session, self.user(), "starred").id
                for key, message_id in stored.items():
                    paths = list(
                        session.scalars(
                            select(Folder.path)
                            .join(MessageLocation, MessageLocation.folder_id == Folder.id)
                            .where(MessageLocation.message_id == message_id)
                        )
                    )
                    assert len(paths) <= 1, f"{key} is in {paths}"
                    if key in self.where:
                        assert paths == [PLACE[self.where[key]]], (key, paths)
                    has_star = session.scalar(
                        select(MessageLabel.message_id).where(
                            MessageLabel.message_id == message_id,
                            MessageLabel.label_id == starred,
                        )
                    )
                    if key in self.local_stars:
                        assert has_star is not None, f"the local star of {key} was reverted"

        @invariant()
        def nothing_doubled(self) -> None:
            if self.fetched:
                self.stored()

    run_state_machine_as_test(
        History,
        settings=hypothesis_settings(
            max_examples=10,
            stateful_step_count=12,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
