"""The test's browser (httpx following an authorization URL) and flows run in threads."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import httpx

T = TypeVar("T")


def open_in_browser(url: str) -> httpx.Response:
    """GET the URL and follow the redirects, as a browser would; the last page."""
    with httpx.Client(follow_redirects=True, timeout=30) as client:
        return client.get(url)


class Background(Generic[T]):
    """Runs ``work(announce)`` in a thread; the test reads the announced URL and the result."""

    def __init__(self, work: Callable[[Callable[[str], None]], T]) -> None:
        self._urls: queue.Queue[str] = queue.Queue()
        self._result: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[Callable[[str], None]], T]) -> None:
        try:
            self._result = work(self._urls.put)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self._error = exc

    def url(self, timeout: float = 30) -> str:
        """The authorization URL the work announced."""
        return self._urls.get(timeout=timeout)

    def result(self, timeout: float = 60) -> T:
        """What the work returned; what it raised is raised here."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the flow did not finish"
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result
