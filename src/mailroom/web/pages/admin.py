"""The admin page (``GET /admin``), for operators only: queue depths, failed sends,
accounts in error, and the assistant's hold figures (:mod:`mailroom.assistant.stats`).

Users have no operator flag in the store; the operators are the user names in
``MAILROOM_ADMINS`` (:attr:`mailroom.config.Settings.admin_list`). Anyone else
gets "not found" (404), as for a page that does not exist.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_, select
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mailroom.assistant.stats import hold_stats
from mailroom.cli.accounts import account_reason
from mailroom.jobs.tasks import pending_counts
from mailroom.outbound.failures import failed_list
from mailroom.store.models import Account, User, utcnow
from mailroom.store.reader import as_reader
from mailroom.web.pages.common import context, page, signed_in
from mailroom.web.pages.layout import layout, render
from mailroom.web.pages.operators import app_queues, is_admin, web_settings
from mailroom.web.sessions import SignedIn

FAILED_SHOWN = 50  # the newest failed sends listed


def queue_depths(request: Request) -> dict[str, Any]:
    """How many jobs wait in each queue (the queues are opened once per application)."""
    return pending_counts(app_queues(request))


@signed_in
def admin_page(request: Request, user: SignedIn) -> Response:
    """GET /admin: what an operator watches."""
    if not is_admin(request, user):
        return page("missing.html", 404, user=user, what="page")
    with context(request).store.session() as session:
        frame = layout(as_reader(session), request, user, "admin")
        failed = failed_list(session, limit=FAILED_SHOWN)
        broken = [
            (
                owner,
                account.name,
                account.status,
                account_reason(account.status, account.status_reason, account.watch_state),
            )
            for account, owner in session.execute(
                select(Account, User.name)
                .join(User, User.id == Account.user_id)
                .where(
                    or_(
                        Account.status == "auth_error",
                        and_(Account.status == "active", Account.status_reason.is_not(None)),
                    )
                )
                .order_by(User.name, Account.name)
            )
        ]
        hold = hold_stats(session, utcnow())
    settings = web_settings(request)
    return render(
        frame,
        "admin.html",
        queues=queue_depths(request),
        failed=failed,
        broken=broken,
        admin=True,
        assistant=settings.assistant,
        hold_max=settings.hold_max_seconds,
        hold=hold,
    )


ROUTES = [Route("/admin", admin_page, methods=["GET"])]
