"""The audit log: security-relevant actions, who did them, when and from where.

``record`` adds a row in the caller's session, so it commits (or rolls back)
with the action itself; ``entries`` reads them for ``mailroom audit``. The
table is ``audit_log`` (migration 0018); its rows are never updated.

The names below are imported on first use, so that ``mailroom audit``, which
needs only the reading (``audit.query``, plain SQL), does not load SQLAlchemy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailroom.audit.log import ACTIONS, Origin, record, record_account
    from mailroom.audit.query import entries

# name -> the module that defines it
_HOMES = {
    "ACTIONS": "log",
    "Origin": "log",
    "entries": "query",
    "record": "log",
    "record_account": "log",
}

__all__ = ["ACTIONS", "Origin", "entries", "record", "record_account"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'mailroom.audit' has no attribute {name!r}")
    return getattr(import_module(f"mailroom.audit.{_HOMES[name]}"), name)
