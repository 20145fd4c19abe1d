"""``Email/copy`` (RFC 8620 §5.4, RFC 8621 §4.7): Emails from one account into another.

RFC 8620 §5.4 requires ``accountId`` to differ from ``fromAccountId``, and a
mailroom user has exactly one JMAP account, so no copy can ever be made:
``fromAccountId`` other than the user's account is ``fromAccountNotFound``,
``accountId`` other than it ``accountNotFound``, and the two being the same
(the only case left) is ``invalidArguments``. To put an Email in more
mailboxes, a client uses ``Email/set`` (``mailboxIds``); to store bytes again,
``Email/import``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import invalid_arguments
from mailroom.jmap.methods.blob import from_account

EMAIL_COPY_ARGUMENTS = frozenset(
    {
        "fromAccountId",
        "ifFromInState",
        "accountId",
        "ifInState",
        "create",
        "onSuccessDestroyOriginal",
        "destroyFromIfInState",
    }
)


def email_copy(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/copy: refused, since a user's only account cannot be copied into itself."""
    from_account(context, args)
    context.check_account(args)
    raise invalid_arguments(
        "accountId must differ from fromAccountId (RFC 8620 §5.4), and this user has "
        "only one account; use Email/set mailboxIds to file an Email in more mailboxes."
    )
