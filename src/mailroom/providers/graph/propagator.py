"""The Graph propagator: mailroom's changes carried to Graph in ``$batch`` requests, idempotently.

Message changes (:mod:`.message_ops` says what Graph should hold): each message
is one ``PATCH`` (``isRead``, ``flag`` and the full ``categories``) and, when its
folder differs, one ``move`` that depends on it (``dependsOn``), so a message's
two parts always go in the same ``$batch`` of at most 20. The answer to a move
carries the message's id in its new folder (a new one unless immutable ids are
used): the outcome records the new location with that id, through :mod:`mailroom.ingest.mirror`,
in the transaction that marks the changes done. A message deleted forever is
``permanentDelete``-d; one Graph no longer has (404) counts as done either way.
A message with no known place yet is retried later.

Folder changes go to :mod:`.folder_ops`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from urllib.parse import quote

from sqlalchemy import update
from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.ingest.mirror import AccountScope, ChangeSet, Placed, add_locations, remove_locations
from mailroom.providers.base import MessageChanges, Outcome
from mailroom.providers.graph.api import MAX_BATCH, update_body
from mailroom.providers.graph.connection import GraphAccount, open_client
from mailroom.providers.graph.folder_ops import propagate_folder_change
from mailroom.providers.graph.message_ops import MessagePlan, plan_message
from mailroom.providers.graph.models import BatchRequest, BatchResult
from mailroom.store.engine import Store
from mailroom.store.models import Message

__all__ = ["GraphPropagator", "requests_for"]

GONE = 404


def _path(graph_id: str) -> str:
    return f"/me/messages/{quote(graph_id, safe='')}"


def requests_for(index: int, plan: MessagePlan) -> list[BatchRequest]:
    """The batch parts that make Graph hold the plan (a PATCH, then a move if needed)."""
    patch = BatchRequest(
        f"p{index}",
        "PATCH",
        _path(plan.graph_id),
        update_body(
            is_read=plan.seen,
            flag_status="flagged" if plan.starred else "notFlagged",
            categories=plan.categories,
        ),
    )
    if not plan.moves:
        return [patch]
    move = BatchRequest(
        f"m{index}",
        "POST",
        f"{_path(plan.graph_id)}/move",
        {"destinationId": plan.target_graph_folder},
        depends_on=(patch.id,),
    )
    return [patch, move]


def _relocate(account_id: int, plan: MessagePlan, new_id: str) -> Callable[[Session], None]:
    def record(session: Session) -> None:
        scope = AccountScope.load(session, account_id)
        changes = ChangeSet()
        remove_locations(session, scope, changes, plan.folder_id, message_ids=[plan.message_id])
        add_locations(
            session,
            scope,
            changes,
            plan.target_folder,
            [Placed(plan.message_id, None, provider_ref=new_id)],
        )
        if new_id != plan.graph_id:
            session.execute(
                update(Message)
                .where(Message.id == plan.message_id, Message.provider_id == plan.graph_id)
                .values(provider_id=new_id)
            )
        changes.record(session, scope.user_id)

    return record


def _settle(
    account_id: int, changes: MessageChanges, plan: MessagePlan, results: dict[str, BatchResult]
) -> Outcome:
    parts = list(results.values())
    failed = [r for r in parts if not r.ok and r.status != GONE]
    if failed:
        return Outcome.retry(changes, str(failed[0].error or f"Graph answered {failed[0].status}"))
    moved = next((r for r in parts if r.id.startswith("m") and r.ok), None)
    if moved is not None and isinstance(moved.body, dict) and moved.body.get("id"):
        return Outcome.done(changes, _relocate(account_id, plan, str(moved.body["id"])))
    return Outcome.done(changes)


class GraphPropagator:
    """Carries pending changes of Microsoft accounts to Graph."""

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings

    def propagate(self, account_id: int, batch: Sequence[MessageChanges]) -> Iterator[Outcome]:
        """Carry the batch: folder changes one by one, messages in ``$batch`` requests."""
        account = open_client(self.store, self.settings, account_id)
        try:
            for changes in batch:
                if changes.folder_label is not None:
                    yield propagate_folder_change(self.store, account, changes)
            messages = [c for c in batch if c.folder_label is None]
            yield from self._deletes(account, [c for c in messages if c.deleted])
            yield from self._messages(account, [c for c in messages if not c.deleted])
        finally:
            account.client.close()

    def _deletes(self, account: GraphAccount, batch: list[MessageChanges]) -> Iterator[Outcome]:
        for start in range(0, len(batch), MAX_BATCH):
            chunk = batch[start : start + MAX_BATCH]
            parts = [
                BatchRequest(f"d{i}", "POST", f"{_path(c.provider_id)}/permanentDelete")
                for i, c in enumerate(chunk)
            ]
            for changes, result in zip(chunk, account.client.batch(parts), strict=True):
                if result.ok or result.status == GONE:
                    yield Outcome.done(changes)
                else:
                    yield Outcome.retry(changes, str(result.error or "Graph refused the delete"))

    def _messages(self, account: GraphAccount, batch: list[MessageChanges]) -> Iterator[Outcome]:
        planned: list[tuple[MessageChanges, MessagePlan]] = []
        with self.store.session() as session:
            for changes in batch:
                plan = plan_message(session, account.account_id, account.user_id, changes)
                if plan is None:
                    yield Outcome.retry(changes, "the message has no known place at Graph yet")
                else:
                    planned.append((changes, plan))
        chunk: list[tuple[MessageChanges, MessagePlan]] = []
        size = 0
        for changes, plan in planned:
            needed = 2 if plan.moves else 1
            if size + needed > MAX_BATCH:
                yield from self._send(account, chunk)
                chunk, size = [], 0
            chunk.append((changes, plan))
            size += needed
        if chunk:
            yield from self._send(account, chunk)

    def _send(
        self, account: GraphAccount, chunk: list[tuple[MessageChanges, MessagePlan]]
    ) -> Iterator[Outcome]:
        parts = [r for _c, plan in chunk for r in requests_for(plan.message_id, plan)]
        results = {r.id: r for r in account.client.batch(parts)}
        for changes, plan in chunk:
            mine = {k: v for k, v in results.items() if k[1:] == str(plan.message_id)}
            yield _settle(account.account_id, changes, plan, mine)
