"""``commit_batch``: the one way a provider stores a batch.

Contract (every provider calls this; none opens the batch's transaction, commits
it or runs the steps itself):

1. one transaction: ``items`` are built (when given as a function of the session,
   e.g. to create the folders they name), ``before`` writes the provider's own
   bookkeeping (IMAP: re-locations of messages already stored), messages a
   linked Gmail account of the owner holds and this account has the better
   claim to move here without the pipeline
   (:func:`mailroom.providers.gmail.gmailify.claim_linked`), then
   :func:`mailroom.ingest.batch.store_batch` inserts the rest exactly once and
   runs the pipeline;
2. the transaction commits — after a failure nothing of the batch is stored and
   the caller simply tries the batch again;
3. only then :func:`mailroom.ingest.steps.run_steps` enqueues the follow-up work
   (it must see committed rows; a failing step never fails the batch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session

from mailroom.ingest.batch import store_batch
from mailroom.ingest.model import BatchResult, IncomingMessage
from mailroom.ingest.steps import run_steps
from mailroom.providers.gmail.gmailify import claim_linked
from mailroom.store.engine import Store

__all__ = ["commit_batch"]


def commit_batch(
    store: Store,
    account_id: int,
    user_id: int,
    items: Sequence[IncomingMessage] | Callable[[Session], Sequence[IncomingMessage]],
    *,
    before: Callable[[Session], None] | None = None,
) -> BatchResult:
    """Store ``items`` in one transaction, commit, then run the steps; see the module docstring."""
    with store.session() as session:
        if before is not None:
            before(session)
        batch = items(session) if callable(items) else items
        batch = claim_linked(session, account_id, user_id, batch)
        result = store_batch(session, account_id, user_id, batch)
    run_steps(result)
    return result
