"""Outgoing mail: the transport contract and the lanes (SPEC §11).

Sending itself (pacing, SMTP, submission) arrives with its own issue; this
package holds the seams it plugs into: :mod:`mailroom.outbound.base` (the
:class:`Transport` protocol and its errors) and :mod:`mailroom.outbound.lanes`.
"""

from __future__ import annotations

from mailroom.outbound.base import RefusedError, SendResult, Transport
from mailroom.outbound.lanes import LANES, lane_for

__all__ = ["LANES", "RefusedError", "SendResult", "Transport", "lane_for"]
