"""The notice an action leaves for the next page when the browser runs no script.

With script, an action's answer is a toast swapped into the page (with its Undo
button). Without it, the form is sent as it is and answered with a redirect to
the page to go on with; the message and the undo token then ride along in a
short-lived cookie, which that page shows as the same toast (a plain form for
Undo) and clears. A token too long for a cookie leaves the message alone.

The cookie only ever shows text (escaped like everything else) and a token the
server still checks: a forged one can neither run script nor undo anything.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["COOKIE", "Notice", "forget", "leave", "left"]

COOKIE = "mailroom_notice"
MAX_COOKIE = 3500  # characters; browsers keep at least 4,096 bytes per cookie
LIFETIME_SECONDS = 120  # the next page is shown at once; a stale notice is not worth keeping


@dataclass(frozen=True, slots=True)
class Notice:
    """What the next page's toast says, the undo token ("" for none) and where Undo goes."""

    message: str
    token: str = ""
    go: str = "/"


def _packed(notice: Notice) -> str:
    text = json.dumps([notice.message, notice.token, notice.go], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode("ascii").rstrip("=")


def leave(response: Response, notice: Notice, *, secure: bool) -> None:
    """Put ``notice`` on ``response`` for the page it redirects to."""
    value = _packed(notice)
    if len(value) > MAX_COOKIE:
        value = _packed(Notice(notice.message, "", notice.go))
    if len(value) > MAX_COOKIE:
        return
    response.set_cookie(
        COOKIE,
        value,
        max_age=LIFETIME_SECONDS,
        path="/",
        httponly=True,
        samesite="lax",
        secure=secure,
    )


def left(request: Request) -> Notice | None:
    """The notice the previous answer left, or None (none, or not one of ours)."""
    value = request.cookies.get(COOKIE)
    if not value or len(value) > MAX_COOKIE:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (binascii.Error, ValueError):
        return None
    if not (
        isinstance(decoded, list) and len(decoded) == 3 and all(isinstance(v, str) for v in decoded)
    ):
        return None
    message, token, go = decoded
    return Notice(message, token, go) if message else None


def forget(response: Response, *, secure: bool) -> None:
    """Clear the notice once a page has shown it."""
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="lax", secure=secure)
