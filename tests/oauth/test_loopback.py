"""The loopback listener: strays ignored, the code returned, refusals and timeouts plain."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from mailroom.oauth.loopback import LoopbackReceiver
from mailroom.oauth.state import StateError
from mailroom.providers.base import AuthError, TransientError
from tests.oauth.browser import Background


def _expect(state: str) -> Callable[[str], None]:
    def check(answered: str) -> None:
        if answered != state:
            raise StateError()

    return check


def _waiting(
    receiver: LoopbackReceiver, state: str = "good", timeout: float = 20
) -> Background[str]:
    def work(announce: Callable[[str], None]) -> str:
        return receiver.wait(_expect(state), timeout=timeout)

    return Background(work)


def test_strays_are_answered_and_the_code_comes_back() -> None:
    """Other paths get 404, a bare callback 400; the answer with a good state gives the code."""
    receiver = LoopbackReceiver()
    assert receiver.redirect_uri == f"http://127.0.0.1:{receiver.port}/callback"
    waiting = _waiting(receiver)
    base = f"http://127.0.0.1:{receiver.port}"
    assert httpx.get(f"{base}/favicon.ico").status_code == 404
    assert httpx.get(f"{base}/callback").status_code == 400
    page = httpx.get(f"{base}/callback", params={"code": "the-code", "state": "good"})
    assert page.status_code == 200 and "return to mailroom" in page.text
    assert "the-code" not in page.text
    assert waiting.result() == "the-code"
    with pytest.raises(httpx.ConnectError):  # one-shot: nothing listens any more
        httpx.get(f"{base}/callback", params={"code": "again", "state": "good"})


def test_a_foreign_state_ends_the_wait_with_the_state_error() -> None:
    """An answer whose state the flow did not issue is refused, page and error both."""
    receiver = LoopbackReceiver()
    waiting = _waiting(receiver)
    page = httpx.get(receiver.redirect_uri, params={"code": "c", "state": "forged"})
    assert page.status_code == 400
    with pytest.raises(StateError):
        waiting.result()


@pytest.mark.parametrize(
    ("error", "kind", "words"),
    [
        ("access_denied", AuthError, "Access was refused in the browser"),
        ("invalid_scope", AuthError, "refused the request: invalid_scope"),
        ("temporarily_unavailable", TransientError, "try again later"),
    ],
)
def test_an_error_answer_is_one_sentence(error: str, kind: type[Exception], words: str) -> None:
    """``error=...`` from the authorization server ends the wait with a plain error."""
    receiver = LoopbackReceiver()
    waiting = _waiting(receiver)
    httpx.get(receiver.redirect_uri, params={"error": error, "state": "good"})
    with pytest.raises(kind, match=words):
        waiting.result()


def test_no_answer_in_time_is_a_transient_error() -> None:
    """Nobody comes back: the wait ends after its timeout, saying so."""
    receiver = LoopbackReceiver()
    with pytest.raises(TransientError, match="No answer came from the browser within 1 seconds"):
        receiver.wait(_expect("good"), timeout=1)
