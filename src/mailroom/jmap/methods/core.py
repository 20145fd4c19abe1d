"""``Core/echo`` (RFC 8620 §4): the arguments, returned as they came."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap.dispatcher import Context


def echo(_context: Context, _session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Core/echo."""
    return args
