"""Sending through Microsoft Graph: ``sendMail`` with the raw MIME (SPEC §11).

:class:`GraphTransport` is the outbound :class:`~mailroom.outbound.base.Transport`
of Microsoft accounts without SMTP settings (registered for ``"microsoft"`` by
:mod:`.provider`). It hands the lane's raw bytes, base64, to ``/me/sendMail``;
Graph saves the copy in Sent Items itself (the entry declares
``files_sent_mail``) and the next sync brings it. A reply is threaded by its
own ``In-Reply-To`` and ``References`` headers, which the MIME carries as they
are: Graph files it in the conversation of the message it answers.

Graph answers for every recipient at once. A refused request (4xx other than
auth and throttling) is a :class:`RefusedError`; throttling is the client's
RateLimitError with the wait, for the lane to retry.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.errors import ProviderError
from mailroom.outbound.base import RefusedError, SendResult
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.graph.connection import GraphAccount, open_client
from mailroom.store.engine import Store
from mailroom.store.models import Account

__all__ = ["GraphTransport", "graph_transport"]


class GraphTransport:
    """Sends one account's mail through Graph ``sendMail``."""

    def __init__(self, store: Store, settings: Settings | None, account_id: int) -> None:
        self.store = store
        self.settings = settings
        self.account_id = account_id
        self._account: GraphAccount | None = None

    def send(
        self, envelope_from: str, recipients: Sequence[str], raw: bytes, *, message_id: str
    ) -> SendResult:
        """Hand ``raw`` to ``sendMail``; every recipient is accepted with it."""
        if self._account is None:
            self._account = open_client(self.store, self.settings, self.account_id)
        try:
            self._account.client.send_mime(raw)
        except (AuthError, TransientError):
            raise
        except ProviderError as exc:
            raise RefusedError(str(exc), code=400, reply=str(exc)) from None
        reply = "accepted by Microsoft Graph"
        return SendResult(message_id, {recipient: reply for recipient in recipients})

    def close(self) -> None:
        """Close the client; a later send opens it again."""
        if self._account is not None:
            self._account.client.close()
            self._account = None


def graph_transport(session: Session, account: Account, settings: Settings) -> GraphTransport:
    """The transport factory ``outbound.transports`` calls for Microsoft accounts."""
    bind = session.get_bind()
    return GraphTransport(Store(bind.engine, settings.data_dir), settings, account.id)
