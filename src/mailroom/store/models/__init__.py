"""All tables of the store; import from here.

The text rule, the same on SQLite and PostgreSQL: text that comes from mail,
a provider or a person (subjects, addresses, names, ids, folder paths,
reasons, rule names) is ``Text``, unbounded, never truncated by the store.
Only values mailroom makes itself stay ``String(n)``: names from a closed set
(status, role, kind, category, operation, state, provider, change type,
sync-state keys) and hex digests, each n fitting the longest of its set.
PostgreSQL still limits one btree index entry to about 2.7 kB, so a
Message-ID or reference that could exceed it is stored as its digest
(``store.keys.id_key``); other indexed provider keys (folder paths, file
keys, Gmail/Graph ids) stay far below it by the providers' own limits.
"""

from mailroom.store.models.audit import AuditEntry
from mailroom.store.models.base import Base, UtcDateTime, utcnow
from mailroom.store.models.changes import CHANGE_KINDS, Change
from mailroom.store.models.events import CalendarFeed, MessageEvent
from mailroom.store.models.gmail import (
    BACKFILL_PHASES,
    GmailBackfill,
    GmailQuotaLimit,
    GmailQuotaUsage,
)
from mailroom.store.models.jmap import (
    ChangeFloor,
    Identity,
    JmapUpload,
    PushSubscription,
    VacationResponse,
)
from mailroom.store.models.keys import BlindVocabulary, KeyRotation, OwnerKey
from mailroom.store.models.labels import SYSTEM_ROLES, Folder, Label, LabelBinding
from mailroom.store.models.messages import (
    Blob,
    Message,
    MessageBody,
    MessageKeyword,
    MessageLabel,
    MessageLocation,
    MessageRef,
)
from mailroom.store.models.outbound import (
    SUBMISSION_STATES,
    Bounce,
    FailedSend,
    SendRateBucket,
    Submission,
    VacationReply,
)
from mailroom.store.models.pending_changes import PENDING_CHANGE_STATES, PendingChange
from mailroom.store.models.rules import Contact, Rule
from mailroom.store.models.signin import SignInFailure, WebSession
from mailroom.store.models.sync import SkippedMessage, SyncState
from mailroom.store.models.threads import Thread, ThreadLabel
from mailroom.store.models.users import Account, ApiToken, User
from mailroom.store.models.webhooks import (
    DELIVERY_STATES,
    AccountEvent,
    WebhookCursor,
    WebhookDelivery,
    WebhookEndpoint,
)

__all__ = [
    "BACKFILL_PHASES",
    "GmailBackfill",
    "GmailQuotaLimit",
    "GmailQuotaUsage",
    "SUBMISSION_STATES",
    "Bounce",
    "FailedSend",
    "SendRateBucket",
    "Submission",
    "VacationReply",
    "CHANGE_KINDS",
    "PENDING_CHANGE_STATES",
    "Contact",
    "PendingChange",
    "Rule",
    "SYSTEM_ROLES",
    "Account",
    "ApiToken",
    "AuditEntry",
    "CalendarFeed",
    "MessageEvent",
    "Base",
    "BlindVocabulary",
    "Blob",
    "Change",
    "ChangeFloor",
    "Folder",
    "Identity",
    "JmapUpload",
    "KeyRotation",
    "Label",
    "LabelBinding",
    "Message",
    "MessageBody",
    "MessageKeyword",
    "MessageLabel",
    "MessageLocation",
    "MessageRef",
    "OwnerKey",
    "PushSubscription",
    "SignInFailure",
    "SkippedMessage",
    "SyncState",
    "Thread",
    "ThreadLabel",
    "User",
    "VacationResponse",
    "WebSession",
    "DELIVERY_STATES",
    "AccountEvent",
    "WebhookCursor",
    "WebhookDelivery",
    "WebhookEndpoint",
    "utcnow",
    "UtcDateTime",
]
