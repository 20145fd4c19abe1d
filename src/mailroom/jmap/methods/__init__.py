"""JMAP methods; :data:`METHODS` maps names to handlers and is the one table.

One module per data type; Email, the largest, has one module per method
(``email_get``, ``email_changes``, ``email_query``, ``email_set``) sharing
:mod:`~mailroom.jmap.methods.email_reader`.
"""

from __future__ import annotations

from mailroom.jmap.dispatcher import Handler, Method
from mailroom.jmap.methods import (
    blob,
    core,
    email_changes,
    email_copy,
    email_get,
    email_import,
    email_parse,
    email_query,
    email_set,
    email_submission,
    identity,
    mailbox,
    mailbox_query,
    mailbox_set,
    push_subscription,
    snippet,
    thread,
    vacation,
)
from mailroom.jmap.methods.arguments import CHANGES, GET, QUERY, QUERY_CHANGES, SET
from mailroom.jmap.methods.common import CORE, MAIL, SUBMISSION, VACATION

MAILBOX_TREE = frozenset({"sortAsTree", "filterAsTree"})
EMAIL_GET = GET | {
    "bodyProperties",
    "fetchTextBodyValues",
    "fetchHTMLBodyValues",
    "fetchAllBodyValues",
    "maxBodyValueBytes",
}


def _method(capability: str, handler: Handler, arguments: frozenset[str] | None) -> Method:
    return Method(capability, handler, arguments)


METHODS: dict[str, Method] = {
    "Core/echo": _method(CORE, core.echo, None),
    "Mailbox/get": _method(MAIL, mailbox.mailbox_get, GET),
    "Mailbox/changes": _method(MAIL, mailbox.mailbox_changes, CHANGES),
    "Mailbox/query": _method(MAIL, mailbox_query.mailbox_query, QUERY | MAILBOX_TREE),
    "Mailbox/queryChanges": _method(
        MAIL, mailbox_query.mailbox_query_changes, QUERY_CHANGES | MAILBOX_TREE
    ),
    "Mailbox/set": _method(MAIL, mailbox_set.mailbox_set, SET | {"onDestroyRemoveEmails"}),
    "Thread/get": _method(MAIL, thread.thread_get, GET),
    "Thread/changes": _method(MAIL, thread.thread_changes, CHANGES),
    "Email/get": _method(MAIL, email_get.email_get, EMAIL_GET),
    "Email/changes": _method(MAIL, email_changes.email_changes, CHANGES),
    "Email/query": _method(MAIL, email_query.email_query, QUERY | {"collapseThreads"}),
    "Email/queryChanges": _method(
        MAIL, email_query.email_query_changes, QUERY_CHANGES | {"collapseThreads"}
    ),
    "Email/set": _method(MAIL, email_set.email_set, SET),
    "Email/import": _method(
        MAIL, email_import.email_import, frozenset({"accountId", "ifInState", "emails"})
    ),
    "Blob/copy": _method(
        CORE, blob.blob_copy, frozenset({"fromAccountId", "accountId", "blobIds"})
    ),
    "Email/copy": _method(MAIL, email_copy.email_copy, email_copy.EMAIL_COPY_ARGUMENTS),
    "Email/parse": _method(
        MAIL,
        email_parse.email_parse,
        (EMAIL_GET - {"ids"}) | {"blobIds"},
    ),
    "SearchSnippet/get": _method(
        MAIL, snippet.snippet_get, frozenset({"accountId", "filter", "emailIds"})
    ),
    "Identity/get": _method(SUBMISSION, identity.identity_get, GET),
    "Identity/changes": _method(SUBMISSION, identity.identity_changes, CHANGES),
    "Identity/set": _method(SUBMISSION, identity.identity_set, SET),
    "VacationResponse/get": _method(VACATION, vacation.vacation_get, GET),
    "VacationResponse/set": _method(VACATION, vacation.vacation_set, SET),
    **push_subscription.METHODS,
    **email_submission.METHODS,
}

__all__ = ["METHODS"]
