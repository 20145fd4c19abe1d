"""Web fixtures: the whole application under uvicorn on loopback, a clock, signed-in browsers.

``serve`` (shared with the JMAP fixtures) runs any application in a thread on
a free port (http, or https with a certificate), so cookies, redirects and the
lock-out are tested over real HTTP on both stores. ``Clock`` is the injectable time of the sign-in
limiter: tests move it past the lock-out window instead of sleeping.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx
import pytest

from mailroom.jmap.auth import Authenticator, LockoutPolicy, SignInLimiter, set_password
from mailroom.store.engine import Store
from mailroom.store.models import utcnow
from mailroom.web.app import create_app
from tests.jmap.conftest import serve

PASSWORD = "correct horse battery staple"
POLICY = LockoutPolicy(
    max_failures_per_name=5, max_failures_per_address=8, window=timedelta(minutes=15)
)


@dataclass
class Clock:
    """A settable clock for the limiter (timezone-aware UTC)."""

    now: datetime = field(default_factory=utcnow)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        """Move the clock forward."""
        self.now += delta


@pytest.fixture
def clock() -> Clock:
    """The limiter's clock, starting now."""
    return Clock()


@pytest.fixture
def auth(store: Store, clock: Clock) -> Authenticator:
    """The authenticator of the served app, with a small lock-out and the test clock."""
    return Authenticator(store, SignInLimiter(store, POLICY, clock=clock))


@pytest.fixture
def server(store: Store, auth: Authenticator) -> Iterator[str]:
    """The whole web application (pages and JMAP) over http on a free loopback port."""
    yield from serve(create_app(store, auth=auth))


def add_user(store: Store, name: str, password: str = PASSWORD) -> None:
    """Create ``name`` with a password, as `mailroom user add` does."""
    with store.session() as session:
        set_password(session, name, password)


def signin_csrf(client: httpx.Client, base: str) -> str:
    """Load the sign-in form in ``client`` (which keeps its cookie); the form's CSRF token."""
    form = client.get(f"{base}/signin")
    assert form.status_code == 200, form.text
    found = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert found is not None
    return found.group(1)


def sign_in(
    client: httpx.Client, base: str, name: str, password: str = PASSWORD, next_: str = "/"
) -> httpx.Response:
    """Submit the sign-in form as a browser would; the (unfollowed) answer."""
    csrf = signin_csrf(client, base)
    return client.post(
        f"{base}/signin",
        data={"name": name, "password": password, "csrf": csrf, "next": next_},
    )


def browser(base: str, **kwargs: object) -> httpx.Client:
    """An httpx client that keeps cookies and does not follow redirects."""
    return httpx.Client(base_url=base, follow_redirects=False, timeout=30, **kwargs)  # type: ignore[arg-type]


def csrf_of(page: str) -> str:
    """The session CSRF token in a signed-in page's sign-out form."""
    found = re.search(r'action="/signout">.*?name="csrf" value="([^"]+)"', page, re.S)
    assert found is not None, page
    return found.group(1)
