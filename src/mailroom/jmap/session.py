"""The JMAP Session resource (RFC 8620 §2) at ``/.well-known/jmap``.

One account per mailroom user (``u<user id>``): the unified view of all of
the user's mail accounts. URLs are absolute, built from the URL the client
used (scheme, host and port, so TLS and proxies with forwarded headers work).
The limits are the ones the server enforces (``dispatcher.Limits``),
including ``maxSizeUpload`` and ``maxConcurrentUpload`` of blob uploads.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mailroom import __version__
from mailroom.categories.cascade import CATEGORIES
from mailroom.jmap import ids
from mailroom.jmap.auth import Principal
from mailroom.jmap.dispatcher import Limits
from mailroom.jmap.emailquery import SORT_PROPERTIES
from mailroom.jmap.methods.common import CORE, MAIL, SUBMISSION, TABS

CAPABILITIES = frozenset({CORE, MAIL, SUBMISSION, TABS})


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
        "collationAlgorithms": ["i;ascii-casemap"],
    }


def account_capabilities() -> dict[str, Any]:
    """What the one account offers."""
    return {
        MAIL: {
            "maxMailboxesPerEmail": None,
            "maxMailboxDepth": None,
            "maxSizeMailboxName": 500,
            "maxSizeAttachmentsPerEmail": 0,
            "emailQuerySortOptions": list(SORT_PROPERTIES),
            "mayCreateTopLevelMailbox": True,
        },
        SUBMISSION: {"maxDelayedSend": 0, "submissionExtensions": {}},
        TABS: {"categories": list(CATEGORIES), "filterProperty": "category"},
    }


def session_state(principal: Principal) -> str:
    """A token that changes whenever the session document would (apart from its URLs)."""
    basis = json.dumps(
        [__version__, principal.user_id, principal.name, sorted(CAPABILITIES)], sort_keys=True
    )
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def session_document(principal: Principal, base_url: str, limits: Limits) -> dict[str, Any]:
    """The Session object for ``principal``; ``base_url`` is scheme://host[:port][/root]."""
    account = ids.account_id(principal.user_id)
    base = base_url.rstrip("/")
    return {
        "capabilities": {
            CORE: core_capability(limits),
            MAIL: {},
            SUBMISSION: {},
            TABS: {},
        },
        "accounts": {
            account: {
                "name": principal.name,
                "isPersonal": True,
                "isReadOnly": False,
                "accountCapabilities": account_capabilities(),
            }
        },
        "primaryAccounts": {CORE: account, MAIL: account, SUBMISSION: account, TABS: account},
        "username": principal.name,
        "apiUrl": f"{base}/jmap/api",
        "downloadUrl": f"{base}/jmap/download/{{accountId}}/{{blobId}}/{{name}}?accept={{type}}",
        "uploadUrl": f"{base}/jmap/upload/{{accountId}}",
        "eventSourceUrl": (
            f"{base}/jmap/eventsource?types={{types}}&closeafter={{closeafter}}&ping={{ping}}"
        ),
        "state": session_state(principal),
    }
