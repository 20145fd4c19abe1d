"""The signature of a webhook: HMAC-SHA256 over ``"<id>.<timestamp>.<body>"``.

Headers of every POST::

    Mailroom-Webhook-Id: <event id>
    Mailroom-Webhook-Timestamp: <unix seconds of this attempt>
    Mailroom-Signature: v1=<hex HMAC-SHA256 of "<id>.<timestamp>.<body>" with the secret>

The timestamp is part of what is signed, so a receiver that refuses old
timestamps (:data:`TOLERANCE`) cannot be fed a recorded request again later.
The check a receiver does is :func:`verify` (docs/operations.md, "Webhooks").
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["SCHEME", "TOLERANCE", "headers", "sign", "verify"]

SCHEME = "v1"
TOLERANCE = 300  # seconds a receiver should accept between the timestamp and its clock


def sign(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    """The ``Mailroom-Signature`` value for one attempt."""
    message = f"{event_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"{SCHEME}={digest}"


def headers(secret: str, event_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one signed POST."""
    return {
        "Content-Type": "application/json",
        "Mailroom-Webhook-Id": event_id,
        "Mailroom-Webhook-Timestamp": str(timestamp),
        "Mailroom-Signature": sign(secret, event_id, timestamp, body),
    }


def verify(
    secret: str,
    event_id: str,
    timestamp: str,
    body: bytes,
    signature: str,
    *,
    now: float,
    tolerance: int = TOLERANCE,
) -> bool:
    """Whether a received request carries a valid, recent signature (the receiver's check)."""
    try:
        stamp = int(timestamp)
    except ValueError:
        return False
    if abs(now - stamp) > tolerance:
        return False
    expected = sign(secret, event_id, stamp, body)
    return any(hmac.compare_digest(expected, part.strip()) for part in signature.split(","))
