"""The transport contract: how one outgoing message is handed to a server.

A transport (SMTP, Gmail API send, Graph sendMail; one module each, siblings of
this one) implements :class:`Transport`. The lane job (see
:mod:`mailroom.outbound.lanes`) builds the raw message, records its Message-ID
*before* the hand-off, calls :meth:`Transport.send` once per attempt and decides
from the outcome what happens next; a transport never retries or paces by
itself, because the lane owns the pace and the retry budget (SPEC §11).

The contract of :meth:`Transport.send`:

* **Idempotent per Message-ID where the transport allows.** A job may be run
  again after a worker died mid-send; a transport that can tell the server
  "this Message-ID was already handed over" (an API with an idempotency key, a
  Sent folder it can search) must not send it twice. SMTP cannot, so for SMTP
  the job's own record of the Message-ID is the guard.
* **It returns only when the server accepted the message** for at least one
  recipient; :class:`SendResult` tells, per recipient, what the server replied,
  and lists the recipients it refused while accepting others.
* **Failures are provider errors** (:mod:`mailroom.providers.base`), never a raw
  ``smtplib``/``httpx`` exception::

      ProviderError
      ├── AuthError        credentials refused, host blocked: the account needs
      │                    its owner; the message is not retried
      ├── TransientError   4xx reply, connection lost, DNS, timeout: retry
      │   └── RateLimitError  the server asked to slow down (``retry_after``)
      └── RefusedError     5xx: the message (or every recipient) is refused for
                           good; it fails at once on every lane, never retried

:meth:`Transport.close` releases a connection kept for reuse between sends of
one account; a later :meth:`Transport.send` connects again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from mailroom.errors import ProviderError
from mailroom.providers.base import AuthError, RateLimitError, TransientError

__all__ = [
    "AuthError",
    "RateLimitError",
    "RefusedError",
    "SendResult",
    "TransientError",
    "Transport",
]


class RefusedError(ProviderError):
    """The server refused the message for good (an SMTP 5xx reply): fail it, do not retry.

    ``code`` is the server's reply code (550, 554, ...) and ``reply`` its text, kept
    for the failed-sends list; the message itself is one plain sentence for the sender.
    """

    def __init__(self, message: str, *, code: int | None = None, reply: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reply = reply


@dataclass(frozen=True)
class SendResult:
    """What the server said about one accepted message.

    ``accepted`` maps each accepted recipient to the server's reply for it
    (JMAP ``deliveryStatus`` is built from these); ``refused`` maps recipients the
    server refused while accepting the others to ``(code, reply)``.
    """

    message_id: str
    accepted: Mapping[str, str]
    refused: Mapping[str, tuple[int, str]] = field(default_factory=dict)


@runtime_checkable
class Transport(Protocol):
    """Hands one raw message to a server for the given envelope (see the module docstring)."""

    def send(
        self, envelope_from: str, recipients: Sequence[str], raw: bytes, *, message_id: str
    ) -> SendResult:
        """Send ``raw`` from ``envelope_from`` to ``recipients``; idempotent per ``message_id``.

        Raises :class:`RefusedError` on a permanent refusal, and the provider
        errors of :mod:`mailroom.providers.base` otherwise.
        """
        ...

    def close(self) -> None:
        """Release any connection kept for reuse; safe to call twice."""
        ...
