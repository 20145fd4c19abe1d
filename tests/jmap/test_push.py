"""EventSource push: coalesced StateChange events, types, closeafter, ping, Last-Event-ID."""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import PASSWORD, Jmap, Person, Server, email_id


@dataclass
class Event:
    """One server-sent event."""

    type: str
    id: str | None
    data: Any


class Stream:
    """An open event-source connection read by a background thread."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.events: queue.Queue[Event | None] = queue.Queue()
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        fields: dict[str, str] = {}
        try:
            for line in self.response.iter_lines():
                if line == "":
                    if "data" in fields or "event" in fields:
                        data = json.loads(fields["data"]) if "data" in fields else None
                        self.events.put(
                            Event(fields.get("event", "message"), fields.get("id"), data)
                        )
                    elif "id" in fields:
                        self.events.put(Event("id-only", fields["id"], None))
                    fields = {}
                    continue
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        except httpx.HTTPError:
            pass
        finally:
            self.ended.set()
            self.events.put(None)

    def close(self) -> None:
        """Hang up now: shut the socket down so the blocked reader sees the end at once."""
        network = self.response.extensions.get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(timeout=5)

    def next(self, timeout: float = 5.0) -> Event | None:
        """The next event (None when the stream ended); fails the test after ``timeout``."""
        return self.events.get(timeout=timeout)

    def next_of(self, kind: str, timeout: float = 5.0) -> Event:
        """The next event of this type."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.next(max(0.01, deadline - time.monotonic()))
            assert event is not None, "the stream ended"
            if event.type == kind:
                return event

    def quiet(self, seconds: float) -> list[Event]:
        """Every event within ``seconds``."""
        seen: list[Event] = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                break
            if event is not None:
                seen.append(event)
        return seen


@contextmanager
def stream(
    server: Server, person: Person, query: str = "types=*&closeafter=no&ping=0", **headers: str
) -> Iterator[Stream]:
    """An event-source connection of ``person`` (Basic auth)."""
    with (
        httpx.Client(auth=(person.name, PASSWORD), timeout=httpx.Timeout(10, read=30)) as http,
        http.stream("GET", f"{server.base}/jmap/eventsource?{query}", headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].split(";")[0] == "text/event-stream"
        opened = Stream(response)
        try:
            yield opened
        finally:
            opened.close()


def test_a_change_is_pushed_once_with_the_new_states(
    server: Server, client: Jmap, alice: Person
) -> None:
    """One Email/set touching three emails arrives as one StateChange with /get's states."""
    with stream(server, alice) as events:
        first = events.next()
        assert first is not None and first.type == "id-only"
        targets = [email_id(m) for m in list(alice.messages.values())[:3]]
        client.call("Email/set", {"update": {t: {"keywords/$seen": True} for t in targets}})
        event = events.next_of("state")
        more = events.quiet(0.5)
    assert [e for e in more if e.type == "state"] == []
    assert event.data["@type"] == "StateChange"
    changed = event.data["changed"][alice.jmap_account]
    assert changed == {t: client.state(t) for t in ("Email", "Mailbox", "Thread")}
    assert event.id is not None and int(event.id) >= int(first.id or 0)


def test_sync_side_changes_are_pushed_too(
    store: Store, server: Server, client: Jmap, alice: Person
) -> None:
    """New mail from a provider (an ingest batch) is pushed like a JMAP change."""
    with stream(server, alice, "types=Email&closeafter=no&ping=0") as events:
        events.next()
        account = (alice.user_id, alice.account_id, alice.inbox)
        ingest(store, account, [("n", make_message("n@x", minutes=99))])
        event = events.next_of("state")
    assert event.data["changed"] == {alice.jmap_account: {"Email": client.state("Email")}}


def test_types_filter_and_other_users_changes(
    server: Server, client: Jmap, alice: Person, bob: Person
) -> None:
    """Only the requested types are pushed, and never another user's changes."""
    with stream(server, alice, "types=Mailbox,Nonsense&closeafter=no&ping=0") as events:
        events.next()
        with Jmap(server, bob) as bobs:
            bobs.call(
                "Email/set", {"update": {email_id(bob.messages["hello"]): {"keywords/$seen": True}}}
            )  # noqa: E501
        assert [e for e in events.quiet(0.4) if e.type == "state"] == []
        client.call(
            "Email/set", {"update": {email_id(alice.messages["hello"]): {"keywords/$seen": True}}}
        )  # noqa: E501
        event = events.next_of("state")
    assert list(event.data["changed"][alice.jmap_account]) == ["Mailbox"]


def test_closeafter_state_ends_the_response(server: Server, client: Jmap, alice: Person) -> None:
    """With closeafter=state the server ends the response after the first state event."""
    with stream(server, alice, "types=*&closeafter=state&ping=0") as events:
        events.next()
        client.call("Email/set", {"destroy": [email_id(alice.messages["other"])]})
        events.next_of("state")
        assert events.next() is None
        assert events.ended.is_set()


def test_ping_carries_the_interval(server: Server, alice: Person) -> None:
    """ping=1 sends ping events with {"interval": 1} while nothing changes."""
    with stream(server, alice, "types=*&closeafter=no&ping=1") as events:
        ping = events.next_of("ping", timeout=4)
    assert ping.data == {"interval": 1} and ping.id is None


def test_last_event_id_resumes_what_was_missed(server: Server, client: Jmap, alice: Person) -> None:
    """Reconnecting with Last-Event-ID gets the types that moved meanwhile, at once."""
    with stream(server, alice) as events:
        client.call(
            "Email/set",
            {"update": {email_id(alice.messages["hello"]): {"keywords/$flagged": True}}},
        )  # noqa: E501
        seen = events.next_of("state")
    assert seen.id is not None
    client.call(
        "Email/set", {"update": {email_id(alice.messages["hello"]): {"keywords/$flagged": None}}}
    )  # noqa: E501
    with stream(server, alice, **{"Last-Event-ID": seen.id}) as events:
        missed = events.next_of("state", timeout=2)
    assert int(missed.id or 0) > int(seen.id)
    assert missed.data["changed"][alice.jmap_account]["Email"] == client.state("Email")
    with stream(server, alice, **{"Last-Event-ID": missed.id or ""}) as events:
        quiet = events.quiet(0.4)
    assert [e.type for e in quiet] == ["id-only"]


def test_event_source_needs_credentials_and_sane_arguments(server: Server, alice: Person) -> None:
    """Without credentials the event source is 401; a bad closeafter or ping is 400."""
    assert httpx.get(f"{server.base}/jmap/eventsource?types=*").status_code == 401
    for query in ("closeafter=maybe", "ping=soon", "ping=-1"):
        answer = httpx.get(f"{server.base}/jmap/eventsource?{query}", auth=("alice", PASSWORD))
        assert answer.status_code == 400
