"""Who operates this mailroom: the application's settings and its admin users.

Users have no operator flag in the store; the operators are the user names in
``MAILROOM_ADMINS`` (:attr:`mailroom.config.Settings.admin_list`). The top bar
links them to ``/admin``; :mod:`mailroom.web.pages.admin` serves only them.
"""

from __future__ import annotations

from starlette.requests import Request

from mailroom.config import Settings, load_settings
from mailroom.web.sessions import SignedIn


def web_settings(request: Request) -> Settings:
    """The settings of the running application (the master key, the allow-list, the admins)."""
    settings: Settings | None = getattr(request.app.state, "settings", None)
    return settings if settings is not None else load_settings()


def is_admin(request: Request, user: SignedIn) -> bool:
    """Whether ``user`` is one of the operators (``MAILROOM_ADMINS``)."""
    return user.name in web_settings(request).admin_list
