"""Delivering push subscriptions (RFC 8620 §7.2): verification, then StateChanges.

:class:`PushDelivery` runs as a task of the server process (started by the
application's lifespan). Every ``poll_interval`` seconds it reads the live
subscriptions (expired ones are deleted: the server must not POST after
``expires``) and

* POSTs a ``PushVerification`` once to each unverified subscription it has
  not yet sent one to in this process (after a restart, again — the code is
  the same);
* for each verified subscription, compares the user's states (one query per
  user, ``jmap.changes.current_states``) with the last ones it pushed, and
  POSTs one ``StateChange`` with the types that moved and the subscription
  asked for (``types``; all when null).

While no subscription exists at all it looks only every ``IDLE_POLL`` seconds.
Changes coalesce: everything committed between two polls is one StateChange,
and while a POST is outstanding or waiting to be retried, newer changes merge
into the next one (newest states win). A failed POST (network error, 5xx,
429) is retried with doubling waits (``PushPolicy.retry_base`` to
``retry_most``) up to ``attempts`` times, then dropped with a log line. A URL
answering 404 or 410 is gone: the subscription is deleted. Every POST goes
through :meth:`PushPolicy.vet` (the SSRF guard) to the vetted address, does
not follow redirects, carries ``TTL`` (and ``Topic`` for StateChanges, so a
push service keeps only the newest), and is encrypted per RFC 8291 when the
subscription has ``keys``.

On PostgreSQL only the process holding the :class:`DeliveryLease` delivers.
States present when a subscription is first seen verified are its baseline;
changes while no server process ran are not pushed (the client resyncs with
/changes when it next connects).

Shutdown (the end of the lifespan) cancels the loop and its POSTs; database
work already running in a thread finishes first (``jmap.threadwork``) and the
lease is released, so no connection outlives the server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlunsplit

import httpx
from sqlalchemy import delete, select
from starlette.applications import Starlette

from mailroom.jmap import ids
from mailroom.jmap.methods.push_subscription import subscription_id
from mailroom.jmap.push_lease import DeliveryLease
from mailroom.jmap.push_policy import PushPolicy, UnresolvableUrl, UnusableUrl
from mailroom.jmap.push_states import PUSH_TYPES, push_states
from mailroom.jmap.threadwork import in_thread
from mailroom.jmap.webpush import UserAgentKeys, encrypt
from mailroom.store.engine import Store
from mailroom.store.models import PushSubscription

if TYPE_CHECKING:
    from mailroom.jmap.app import JmapConfig

log = logging.getLogger(__name__)
GONE = (404, 410)
# Seconds between looks while nobody has a subscription (a new one waits at most this).
IDLE_POLL = 1.0


@dataclass(frozen=True, slots=True)
class Target:
    """What a POST needs to know about one subscription."""

    id: int
    user_id: int
    url: str
    keys: dict[str, str] | None
    verified: bool
    verification_code: str
    types: tuple[str, ...]


class _Gone(Exception):
    """The subscription's URL answered 404/410."""


class PushDelivery:
    """The delivery loop of one server process."""

    def __init__(
        self,
        store: Store,
        policy: PushPolicy,
        poll_interval: float,
        stopping: threading.Event | None = None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.poll_interval = poll_interval
        self.stopping = stopping or threading.Event()
        self._verification_sent: set[int] = set()
        self._pushed: dict[int, dict[str, int]] = {}
        self._pending: dict[int, dict[str, int]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None
        self._idle = False
        self.lease = DeliveryLease(store)

    async def run(self) -> None:
        """Poll and deliver until ``stopping`` is set or the task is cancelled."""
        async with httpx.AsyncClient(
            timeout=self.policy.timeout, follow_redirects=False, trust_env=False
        ) as client:
            self._client = client
            try:
                while not self.stopping.is_set():
                    try:
                        if await in_thread(self.lease.hold):
                            await self.tick()
                        else:
                            self._idle = True  # another process delivers; look now and then
                    except Exception:
                        log.exception("push delivery: one round failed; trying again")
                    await asyncio.sleep(
                        max(self.poll_interval, IDLE_POLL) if self._idle else self.poll_interval
                    )
            finally:
                for task in list(self._tasks):
                    task.cancel()
                try:
                    await asyncio.gather(*self._tasks, return_exceptions=True)
                finally:
                    self._client = None
                    await in_thread(self.lease.release)

    def _load(self) -> tuple[list[Target], dict[int, dict[str, int]]]:
        now = datetime.now(UTC)
        with self.store.session() as session:
            rows = list(session.scalars(select(PushSubscription).order_by(PushSubscription.id)))
            expired = [r.id for r in rows if r.expires_at is not None and r.expires_at <= now]
            if expired:  # deleting only then keeps an idle poll free of writes (SQLite locks)
                session.execute(delete(PushSubscription).where(PushSubscription.id.in_(expired)))
                rows = [r for r in rows if r.id not in expired]
            targets = [
                Target(
                    r.id,
                    r.user_id,
                    r.url,
                    r.keys,
                    bool(r.verified),
                    r.verification_code,
                    tuple(
                        PUSH_TYPES if r.types is None else [t for t in PUSH_TYPES if t in r.types]
                    ),
                )
                for r in rows
            ]
            users = {t.user_id for t in targets if t.verified}
            states = {user: push_states(session, user) for user in users}
        return targets, states

    async def tick(self) -> None:
        """One round: verifications to send, state changes to push."""
        targets, states = await in_thread(self._load)
        self._idle = not targets and not self._tasks
        alive = {t.id for t in targets}
        for gone in set(self._pushed) - alive:
            del self._pushed[gone]
        self._verification_sent &= alive
        for target in targets:
            if not target.verified:
                if target.id not in self._verification_sent:
                    self._verification_sent.add(target.id)
                    self._start(target, self._verification(target))
                continue
            now = states[target.user_id]
            before = self._pushed.get(target.id)
            self._pushed[target.id] = now
            if before is None:
                continue
            moved = {t: now[t] for t in target.types if now[t] != before[t]}
            if moved:
                self._pending.setdefault(target.id, {}).update(moved)
                sender = self._senders.get(target.id)
                if sender is None or sender.done():
                    self._start(target, self._state_changes(target))

    def _start(self, target: Target, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if target.verified:
            self._senders[target.id] = task

            def done(finished: asyncio.Task[None]) -> None:
                if self._senders.get(target.id) is finished:  # not a newer sender
                    del self._senders[target.id]

            task.add_done_callback(done)

    async def _verification(self, target: Target) -> None:
        payload = {
            "@type": "PushVerification",
            "pushSubscriptionId": subscription_id(target.id),
            "verificationCode": target.verification_code,
        }
        await self._deliver(target, payload, topic=None)

    async def _state_changes(self, target: Target) -> None:
        while self._pending.get(target.id):
            changed = self._pending.pop(target.id)
            payload = {
                "@type": "StateChange",
                "changed": {
                    ids.account_id(target.user_id): {t: str(s) for t, s in changed.items()}
                },
            }
            await self._deliver(target, payload, topic="jmapstate")

    async def _deliver(self, target: Target, payload: dict[str, Any], topic: str | None) -> None:
        wait = self.policy.retry_base
        for attempt in range(1, self.policy.attempts + 1):
            if attempt > 1 and not await in_thread(self._exists, target.id):
                return  # destroyed (or expired) while waiting to retry
            try:
                if await self._post(target, payload, topic):
                    return
            except UnresolvableUrl:
                pass  # DNS may answer on the next try
            except _Gone:
                await in_thread(self._forget, target.id)
                return
            except UnusableUrl as unusable:
                log.warning("push subscription %s: %s", target.id, unusable)
                return
            if attempt < self.policy.attempts:
                await asyncio.sleep(wait)
                wait = min(wait * 2, self.policy.retry_most)
                newer = self._pending.pop(target.id, None)
                if newer and payload.get("@type") == "StateChange":
                    account = ids.account_id(target.user_id)
                    payload["changed"][account].update({t: str(s) for t, s in newer.items()})
        log.warning("push subscription %s: dropped a %s after retries", target.id, payload["@type"])

    def _exists(self, subscription: int) -> bool:
        now = datetime.now(UTC)
        with self.store.session() as session:
            row = session.get(PushSubscription, subscription)
            return row is not None and (row.expires_at is None or row.expires_at > now)

    def _forget(self, subscription: int) -> None:
        with self.store.session() as session:
            session.execute(delete(PushSubscription).where(PushSubscription.id == subscription))
        self._pushed.pop(subscription, None)
        log.info("push subscription %s: its URL is gone (404/410); deleted", subscription)

    async def _post(self, target: Target, payload: dict[str, Any], topic: str | None) -> bool:
        """POST one payload; True when the push service took it."""
        assert self._client is not None
        parts, address = await in_thread(self.policy.vet, target.url)
        assert parts.hostname is not None
        body = json.dumps(payload).encode()
        headers = {"TTL": str(self.policy.ttl), "Host": parts.netloc}
        if topic:
            headers["Topic"] = topic
        if target.keys:
            keys = UserAgentKeys.parse(target.keys.get("p256dh"), target.keys.get("auth"))
            body = encrypt(body, keys)
            headers["Content-Encoding"] = "aes128gcm"
            headers["Content-Type"] = "application/octet-stream"
        else:
            headers["Content-Type"] = "application/json; charset=utf-8"
        host = f"[{address}]" if ":" in address else address
        port = parts.port or (443 if parts.scheme == "https" else 80)
        url = urlunsplit((parts.scheme, f"{host}:{port}", parts.path or "/", parts.query, ""))
        extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
        try:
            # The answer's body is never read: an endpoint cannot make the server hold it.
            async with self._client.stream(
                "POST", url, content=body, headers=headers, extensions=extensions
            ) as response:
                status, taken = response.status_code, response.is_success
        except httpx.HTTPError as exc:
            log.info("push subscription %s: POST failed: %s", target.id, exc)
            return False
        if status in GONE:
            raise _Gone
        return taken


def delivery_lifespan(
    store: Store, config: JmapConfig
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The application lifespan that runs :class:`PushDelivery` while the server serves."""

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        delivery = PushDelivery(store, config.push, config.poll_interval, config.stopping)
        task = asyncio.create_task(delivery.run())
        try:
            yield
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    return lifespan
