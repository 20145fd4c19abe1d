"""The transport contract: its shape, its result and where a permanent refusal sits."""

from __future__ import annotations

from collections.abc import Sequence

import mailroom.outbound as outbound
from mailroom.errors import ProviderError
from mailroom.outbound.base import (
    AuthError,
    RateLimitError,
    RefusedError,
    SendResult,
    TransientError,
    Transport,
)


class RecordingTransport:
    """Accepts every recipient except those it is told to refuse, and keeps what it sent."""

    def __init__(self, refuse: Sequence[str] = ()) -> None:
        self.refuse = set(refuse)
        self.sent: dict[str, bytes] = {}
        self.closed = 0

    def send(
        self, envelope_from: str, recipients: Sequence[str], raw: bytes, *, message_id: str
    ) -> SendResult:
        """Send once per Message-ID: a repeated id returns without sending again."""
        if set(recipients) <= self.refuse:
            raise RefusedError("Every recipient was refused.", code=550, reply="5.1.1 unknown")
        self.sent.setdefault(message_id, raw)
        return SendResult(
            message_id,
            accepted={r: "250 2.1.5 ok" for r in recipients if r not in self.refuse},
            refused={r: (550, "5.1.1 unknown") for r in recipients if r in self.refuse},
        )

    def close(self) -> None:
        """Count the closes (nothing is held)."""
        self.closed += 1


def test_a_class_with_send_and_close_is_a_transport() -> None:
    """The protocol is structural: send and close make a Transport, send alone does not."""

    class SendOnly:
        def send(
            self, envelope_from: str, recipients: Sequence[str], raw: bytes, *, message_id: str
        ) -> SendResult:
            return SendResult(message_id, accepted={})

    transport: Transport = RecordingTransport()
    assert isinstance(transport, Transport)
    assert not isinstance(SendOnly(), Transport)


def test_send_result_reports_accepted_and_refused_recipients() -> None:
    """A partly refused message is a result naming each recipient's reply, not an error."""
    transport = RecordingTransport(refuse=["gone@example.org"])
    result = transport.send(
        "me@example.org", ["you@example.org", "gone@example.org"], b"raw", message_id="<1@x>"
    )
    assert result.accepted == {"you@example.org": "250 2.1.5 ok"}
    assert result.refused == {"gone@example.org": (550, "5.1.1 unknown")}
    transport.send("me@example.org", ["you@example.org"], b"raw", message_id="<1@x>")
    assert list(transport.sent) == ["<1@x>"]


def test_refused_error_is_permanent_and_keeps_the_reply() -> None:
    """RefusedError is a provider error but not a transient one, so no retry path catches it."""
    error = RefusedError("The server refused the message.", code=554, reply="5.7.1 spam")
    assert isinstance(error, ProviderError)
    assert not isinstance(error, TransientError | AuthError)
    assert (error.code, error.reply, str(error)) == (554, "5.7.1 spam", error.args[0])
    assert issubclass(RateLimitError, TransientError)


def test_outbound_public_names_are_a_decision() -> None:
    """The package exports exactly the transport contract and the lane function."""
    assert sorted(outbound.__all__) == [
        "LANES",
        "RefusedError",
        "SendResult",
        "Transport",
        "lane_for",
    ]
