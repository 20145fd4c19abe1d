"""Who operates this mailroom: the application's settings and its admin users.

Users have no operator flag in the store; the operators are the user names in
``MAILROOM_ADMINS`` (:attr:`mailroom.config.Settings.admin_list`). The top bar
links them to ``/admin``; :mod:`mailroom.web.pages.admin` serves only them. The
job queues the admin page and ``/metrics`` read are opened here, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

from mailroom.config import Settings, load_settings
from mailroom.web.sessions import SignedIn

if TYPE_CHECKING:
    from huey import Huey


def web_settings(request: Request) -> Settings:
    """The settings of the running application (the master key, the allow-list, the admins)."""
    settings: Settings | None = getattr(request.app.state, "settings", None)
    return settings if settings is not None else load_settings()


def app_queues(request: Request) -> dict[str, Huey]:
    """The job queues of the running application, opened on first use and then shared
    (``/admin`` shows their depths, ``/metrics`` counts them)."""
    queues: dict[str, Huey] | None = getattr(request.app.state, "queues", None)
    if queues is None:
        from mailroom.jobs.queues import make_queues  # not at import: most pages never need it

        queues = make_queues(web_settings(request))
        request.app.state.queues = queues
    return queues


def is_admin(request: Request, user: SignedIn) -> bool:
    """Whether ``user`` is one of the operators (``MAILROOM_ADMINS``)."""
    return user.name in web_settings(request).admin_list
