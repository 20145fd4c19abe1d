"""The JMAP Session resource (RFC 8620 §2) at ``/.well-known/jmap``.

One account per mailroom user (``u<user id>``): the unified view of all of
the user's mail accounts. URLs are absolute, built from the URL the client
used (scheme, host and port, so TLS and proxies with forwarded headers work);
the WebSocket URL (RFC 8887) is the same with ``ws``/``wss``.
The limits are the ones the server enforces (``dispatcher.Limits``),
including ``maxSizeUpload`` and ``maxConcurrentUpload`` of blob uploads.

``capabilities`` names every capability the server supports, with its
server-wide object; ``accountCapabilities`` holds only those with data in an
account (mail, submission, vacation response), and ``primaryAccounts`` names
exactly those: core, websocket and mailroom's tabs are not account
capabilities. ``state`` is a digest of the whole document apart from its
URLs (and the moving latest FUTURERELEASE date-time of the submission
capability), so it changes whenever anything a client may cache changes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mailroom import __version__
from mailroom.categories import CATEGORIES
from mailroom.jmap import ids
from mailroom.jmap.auth import Principal
from mailroom.jmap.comparators import COLLATIONS
from mailroom.jmap.dispatcher import Limits
from mailroom.jmap.email_form import MAX_SIZE_ATTACHMENTS_PER_EMAIL
from mailroom.jmap.emailquery import SORT_PROPERTIES
from mailroom.jmap.methods.common import (
    CORE,
    EVENTS,
    MAIL,
    SUBMISSION,
    TABS,
    VACATION,
    WEBSOCKET,
)
from mailroom.jmap.submission_policy import FUTURERELEASE, SubmissionPolicy, submission_capability

CAPABILITIES = frozenset({CORE, MAIL, SUBMISSION, VACATION, WEBSOCKET, TABS, EVENTS})
WEBSOCKET_PATH = "/jmap/ws"


def core_capability(limits: Limits) -> dict[str, Any]:
    """The ``urn:ietf:params:jmap:core`` capability object."""
    return {
        "maxSizeUpload": limits.max_size_upload,
        "maxConcurrentUpload": limits.max_concurrent_upload,
        "maxSizeRequest": limits.max_size_request,
        "maxConcurrentRequests": limits.max_concurrent_requests,
        "maxCallsInRequest": limits.max_calls_in_request,
        "maxObjectsInGet": limits.max_objects_in_get,
        "maxObjectsInSet": limits.max_objects_in_set,
        "collationAlgorithms": list(COLLATIONS),
    }


def account_capabilities(submission: SubmissionPolicy | None = None) -> dict[str, Any]:
    """What the one account offers (RFC 8621 §1.3.1, §1.3.2, §8)."""
    return {
        MAIL: {
            "maxMailboxesPerEmail": None,
            "maxMailboxDepth": None,
            "maxSizeMailboxName": 500,
            "maxSizeAttachmentsPerEmail": MAX_SIZE_ATTACHMENTS_PER_EMAIL,
            "emailQuerySortOptions": list(SORT_PROPERTIES),
            "mayCreateTopLevelMailbox": True,
        },
        SUBMISSION: submission_capability(submission or SubmissionPolicy()),
        VACATION: {},
    }


def server_capabilities(limits: Limits, base: str) -> dict[str, Any]:
    """The session's ``capabilities``: every supported capability and its server-wide object."""
    scheme, _, rest = base.partition("://")
    websocket = f"{'wss' if scheme == 'https' else 'ws'}://{rest}{WEBSOCKET_PATH}"
    return {
        CORE: core_capability(limits),
        MAIL: {},
        SUBMISSION: {},
        VACATION: {},
        WEBSOCKET: {"url": websocket, "supportsPush": True},
        TABS: {"categories": list(CATEGORIES), "filterProperty": "category"},
        EVENTS: {"emailProperty": "events"},
    }


_URLS = ("apiUrl", "downloadUrl", "uploadUrl", "eventSourceUrl")


def _without_urls(document: dict[str, Any]) -> dict[str, Any]:
    capabilities = dict(document["capabilities"])
    capabilities[WEBSOCKET] = {**capabilities[WEBSOCKET], "url": None}
    kept = {k: v for k, v in document.items() if k not in _URLS and k != "state"}
    accounts = {}
    for account_id, account in document["accounts"].items():
        offered = dict(account["accountCapabilities"])
        extensions = dict(offered[SUBMISSION]["submissionExtensions"])
        if FUTURERELEASE in extensions:  # its latest date-time moves with the clock
            extensions[FUTURERELEASE] = extensions[FUTURERELEASE][:1]
        offered[SUBMISSION] = {**offered[SUBMISSION], "submissionExtensions": extensions}
        accounts[account_id] = {**account, "accountCapabilities": offered}
    return {
        **kept,
        "accounts": accounts,
        "capabilities": capabilities,
        "version": __version__,
    }


def _state_of(document: dict[str, Any]) -> str:
    basis = json.dumps(_without_urls(document), sort_keys=True)
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def session_state(
    principal: Principal,
    limits: Limits | None = None,
    submission: SubmissionPolicy | None = None,
) -> str:
    """A token that changes whenever the session document would (apart from its URLs)."""
    return _state_of(_document(principal, "http://localhost", limits or Limits(), submission))


def _document(
    principal: Principal, base: str, limits: Limits, submission: SubmissionPolicy | None
) -> dict[str, Any]:
    account = ids.account_id(principal.user_id)
    accounts = account_capabilities(submission)
    return {
        "capabilities": server_capabilities(limits, base),
        "accounts": {
            account: {
                "name": principal.name,
                "isPersonal": True,
                "isReadOnly": False,
                "accountCapabilities": accounts,
            }
        },
        "primaryAccounts": {capability: account for capability in accounts},
        "username": principal.name,
        "apiUrl": f"{base}/jmap/api",
        "downloadUrl": f"{base}/jmap/download/{{accountId}}/{{blobId}}/{{name}}?accept={{type}}",
        "uploadUrl": f"{base}/jmap/upload/{{accountId}}",
        "eventSourceUrl": (
            f"{base}/jmap/eventsource?types={{types}}&closeafter={{closeafter}}&ping={{ping}}"
        ),
    }


def session_document(
    principal: Principal,
    base_url: str,
    limits: Limits,
    submission: SubmissionPolicy | None = None,
) -> dict[str, Any]:
    """The Session object for ``principal``; ``base_url`` is scheme://host[:port][/root]."""
    document = _document(principal, base_url.rstrip("/"), limits, submission)
    document["state"] = _state_of(document)
    return document
