"""The Gmail emulator as tests use it: start it, script the mailbox, read the log.

>>> with GmailEmulator() as gmail:                    # doctest: +SKIP
...     token = gmail.access_token()
...     message_id = gmail.add_message(raw, labels=["INBOX", "UNREAD"])
...     httpx.get(f"{gmail.url}/gmail/v1/users/me/messages/{message_id}", ...)

Everything a test changes here behaves as if Gmail (or the owner in Gmail's
web page) did it: each change is in the history log, with a new historyId.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from types import TracebackType
from typing import Self

from tests.emulators.gmail.mailbox import Mailbox, StoredMessage
from tests.emulators.gmail.oauth import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, OAuthServer
from tests.emulators.gmail.quota import DOCUMENTED, QuotaMeter, QuotaProfile
from tests.emulators.gmail.server import EmulatorHTTPServer, serve_in_thread
from tests.emulators.gmail.service import GmailService, LoggedRequest

DEFAULT_LABELS = ("INBOX", "UNREAD")


class GmailEmulator:
    """One mailbox behind a real HTTP server on 127.0.0.1."""

    def __init__(
        self,
        address: str = "owner@example.com",
        *,
        profile: QuotaProfile = DOCUMENTED,
        client_id: str = DEFAULT_CLIENT_ID,
        client_secret: str = DEFAULT_CLIENT_SECRET,
        access_token_lifetime: float = 3599.0,
        quota_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``quota_clock`` (seconds) times the quota's minute: a benchmark passes the
        clock its pacer reads, scaled, so both count the same minutes."""
        self.mailbox = Mailbox(address)
        self.oauth = OAuthServer(client_id, client_secret, access_token_lifetime)
        self.quota = QuotaMeter(profile, quota_clock)
        self.service = GmailService(self.mailbox, self.oauth, self.quota)
        self._server: EmulatorHTTPServer | None = None

    # -- life -------------------------------------------------------------

    def start(self, port: int = 0) -> Self:
        """Listen on 127.0.0.1 (``port`` 0: a free one)."""
        self._server = EmulatorHTTPServer(port, self.service, self.oauth)
        serve_in_thread(self._server)
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port it listens on."""
        assert self._server is not None, "the emulator is not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL (Google's paths live under it: /gmail/v1, /batch, /token)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        """The mailbox's email address."""
        return self.mailbox.address

    # -- tokens -----------------------------------------------------------

    def access_token(self) -> str:
        """A live access token (as if the owner had just consented)."""
        return self.oauth.issue_tokens()[0]

    def tokens(self) -> tuple[str, str]:
        """A live (access token, refresh token) pair."""
        return self.oauth.issue_tokens()

    def expire_tokens(self) -> None:
        """Every access token issued so far now answers 401."""
        self.oauth.expire_access_tokens()

    def revoke_refresh_tokens(self) -> None:
        """Refresh tokens are refused from now on (``invalid_grant``)."""
        self.oauth.revoke_refresh_tokens()

    # -- mail -------------------------------------------------------------

    def add_message(
        self,
        raw: bytes,
        labels: Iterable[str] = DEFAULT_LABELS,
        *,
        thread_id: str | None = None,
        internal_date: int | None = None,
    ) -> str:
        """Deliver a message; its thread is ``thread_id`` or derived like Gmail's. Its id."""
        with self.mailbox.lock:
            thread = thread_id or self.mailbox.thread_for_delivery(raw)
            return self.mailbox.add(raw, labels, thread_id=thread, internal_date=internal_date).id

    def add_chat(self, text: str = "hi", *, internal_date: int | None = None) -> str:
        """A Hangouts chat message (label CHAT), listed like mail. Its id."""
        raw = (
            f"From: friend@example.com\r\nTo: {self.address}\r\nSubject: Chat with friend\r\n"
            f"Content-Type: text/plain; charset=UTF-8\r\n\r\n{text}\r\n"
        ).encode()
        return self.mailbox.add(raw, ["CHAT"], internal_date=internal_date).id

    def add_unfetchable(
        self, labels: Iterable[str] = DEFAULT_LABELS, *, internal_date: int | None = None
    ) -> str:
        """An id messages.list shows but messages.get answers with 404. The id."""
        raw = b"Subject: gone\r\n\r\ngone\r\n"
        return self.mailbox.add(raw, labels, internal_date=internal_date, unfetchable=True).id

    def relabel(self, message_id: str, labels: Iterable[str]) -> None:
        """Give the message exactly these labels."""
        self.mailbox.set_labels(message_id, labels)

    def change_labels(
        self, message_id: str, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> None:
        """Add and remove labels in one change."""
        self.mailbox.change_labels(message_id, add, remove, by_client=False)

    def trash(self, message_id: str) -> None:
        """Move the message to the trash (labelAdded TRASH)."""
        self.mailbox.change_labels(message_id, ["TRASH"], by_client=False)

    def untrash(self, message_id: str) -> None:
        """Take the message out of the trash."""
        self.mailbox.change_labels(message_id, (), ["TRASH"], by_client=False)

    def delete(self, message_id: str) -> None:
        """Delete the message forever (messageDeleted)."""
        self.mailbox.delete(message_id)

    def categorize(self, message_id: str, category: str) -> None:
        """Sort the message into a tab: one CATEGORY_* label, the others removed."""
        self.mailbox.categorize(message_id, category)

    def create_label(self, name: str) -> str:
        """A new user label. Its id."""
        return self.mailbox.create_label(name).id

    def rename_label(self, label_id: str, name: str) -> None:
        """Rename a user label (as the owner in Gmail's settings)."""
        self.mailbox.patch_label(label_id, {"name": name})

    def delete_label(self, label_id: str) -> None:
        """Delete a user label (it leaves its messages)."""
        self.mailbox.delete_label(label_id)

    def message(self, message_id: str) -> StoredMessage:
        """A copy of the stored message (KeyError if there is none)."""
        with self.mailbox.lock:
            return copy.deepcopy(self.mailbox.messages[message_id])

    def label_ids(self, message_id: str) -> set[str]:
        """The message's labels now."""
        return set(self.message(message_id).labels)

    def label_names(self) -> dict[str, str]:
        """Label id -> name, every label."""
        with self.mailbox.lock:
            return {label.id: label.name for label in self.mailbox.labels.values()}

    @property
    def history_id(self) -> int:
        """The mailbox's current historyId."""
        return self.mailbox.history_id

    def expire_history(self, before: int | None = None) -> None:
        """Forget history before ``before`` (default: all of it, up to now)."""
        self.mailbox.expire_history(self.history_id + 1 if before is None else before)

    # -- quota, faults, latency -------------------------------------------

    def set_quota_limit(self, units_per_minute: int) -> None:
        """Change the per-user limit (units per sliding minute)."""
        self.quota.limit = units_per_minute

    def set_profile(self, profile: QuotaProfile) -> None:
        """Use another cost/limit profile (the limit too)."""
        self.quota.profile = profile
        self.quota.limit = profile.limit_per_minute

    def set_burst_limit(self, units_per_second: int | None) -> None:
        """Refuse calls that would spend more than this within one second (None: off)."""
        self.quota.burst_per_second = units_per_second

    def reset_quota(self) -> None:
        """Forget the units spent (as if a minute had passed)."""
        self.quota.reset()

    def set_rejection_status(self, status: int) -> None:
        """What a call past the limit gets on its own: 403 (default) or 429."""
        if status not in (403, 429):
            raise ValueError("the rejection status is 403 or 429")
        self.service.rejection_status = status

    def block_sending(self, until: datetime | None) -> None:
        """Refuse messages.send / drafts.send with Gmail's sending-limit 429 until then."""
        self.service.sending_blocked_until = until

    def inject_faults(self, count: int, status: int = 500, *, in_batch: bool | None = None) -> None:
        """The next ``count`` API calls fail with ``status`` (batch parts only with in_batch)."""
        self.service.inject_faults(count, status, in_batch)

    def set_latency(self, seconds: float) -> None:
        """Wait this long before answering each HTTP request."""
        assert self._server is not None, "the emulator is not started"
        self._server.latency = seconds

    # -- the request log --------------------------------------------------

    @property
    def requests(self) -> list[LoggedRequest]:
        """Every call answered so far (a copy), oldest first."""
        with self.service._lock:
            return list(self.service.log)

    def clear_log(self) -> None:
        """Forget the calls logged so far."""
        with self.service._lock:
            self.service.log.clear()

    def units_charged(self) -> int:
        """The quota units charged over the whole log."""
        return sum(entry.units for entry in self.requests)

    def calls(self, method: str) -> list[LoggedRequest]:
        """The logged calls of one API method (``messages.get``)."""
        return [entry for entry in self.requests if entry.method == method]
