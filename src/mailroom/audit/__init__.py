"""The audit log: security-relevant actions, who did them, when and from where.

``record`` adds a row in the caller's session, so it commits (or rolls back)
with the action itself; ``entries`` reads them for ``mailroom audit``. The
table is ``audit_log`` (migration 0018); its rows are never updated.
"""

from mailroom.audit.log import ACTIONS, Origin, record, record_account
from mailroom.audit.query import entries

__all__ = ["ACTIONS", "Origin", "entries", "record", "record_account"]
