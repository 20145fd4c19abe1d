"""Many IDLE watches in one process: one selector thread and a few work threads.

A thread per watch (:class:`~mailroom.providers.imap.watcher.ImapWatcher` in the
supervisor's own thread) costs a thread stack and a wake-up a second each; at a
thousand accounts that is a thousand threads polling their sockets. Here an
account in IDLE costs only its connection: the :class:`IdleMux` thread waits on
every idling socket at once (``selectors``: epoll on Linux) and hands a socket
that has something to say — or whose IDLE is due for renewal, or whose watch
was asked to stop — to a small pool of work threads. The work (log in, catch the
inbox up, DONE, sync, IDLE again, LOGOUT) is the same code as the threaded
watcher's, on the same :class:`~mailroom.providers.imap.connection.ImapConnection`;
IDLE itself is a line protocol, so nothing but the socket's readability needs
watching while a connection idles.

:class:`MuxWatcher` is the supervisor's view of one such watch: ``start(done)``
returns at once and ``done(error or None)`` is called once when the watch ends
(the supervisor then backs off and restarts it as before); ``stop()`` asks it to
end (DONE, LOGOUT) and returns at once; ``run()`` blocks until it ends, for
callers that want the threaded behaviour.

A step never blocks the selector: only the work threads talk to servers, and a
slow server (a long sync, a 30 s timeout) holds one work thread, not the others'
wake-ups. IDLE is re-issued every ``renew_after`` seconds (under RFC 2177's 29
minutes), as in the threaded watcher.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from mailroom.config import Settings
from mailroom.providers.imap.connection import ImapConnection
from mailroom.providers.imap.login import open_connection
from mailroom.providers.imap.watcher import CATCH_UP, RENEW_AFTER, ImapWatcher, interesting
from mailroom.store.engine import Store

__all__ = ["WORK_THREADS", "IdleMux", "MuxWatcher", "shared_mux"]

log = logging.getLogger(__name__)

# Work threads per process: they log in, sync and re-IDLE. A few suffice — a watch
# needs one only for the moments it talks to its server — and they bound how many
# connections a starting supervisor opens at once.
WORK_THREADS = 8
Done = Callable[[BaseException | None], None]


class IdleMux:
    """One selector over every idling connection, and a pool that works on them."""

    def __init__(self, workers: int = WORK_THREADS, name: str = "idle") -> None:
        self._selector = selectors.DefaultSelector()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{name}-work")
        self._name = name
        self._lock = threading.Lock()
        self._incoming: list[tuple[MuxWatcher, float]] = []  # parked by work threads
        self._stopping: list[MuxWatcher] = []
        self._parked: dict[MuxWatcher, float] = {}  # watch -> IDLE renewal deadline
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- called from any thread ----------------------------------------------------

    def submit(self, watch: MuxWatcher, step: Callable[[], None]) -> None:
        """Run one step of ``watch`` on a work thread; a failure ends the watch."""
        self._pool.submit(watch.guarded, step)

    def park(self, watch: MuxWatcher, deadline: float) -> None:
        """Wait (in IDLE) for ``watch``'s socket to speak, until ``deadline`` (monotonic)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name=f"{self._name}-select", daemon=True
                )
                self._thread.start()
            self._incoming.append((watch, deadline))
        self._poke()

    def wake(self, watch: MuxWatcher) -> None:
        """Tell the selector that ``watch`` was asked to stop."""
        with self._lock:
            self._stopping.append(watch)
        self._poke()

    def idling(self) -> int:
        """How many connections sit in IDLE right now."""
        with self._lock:
            return len(self._parked)

    def close(self) -> None:
        """End the selector thread and the pool (watches must have been stopped)."""
        with self._lock:
            self._closed = True
        self._poke()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._pool.shutdown(wait=True)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _poke(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):  # a full pipe is awake anyway
            self._wake_w.send(b"\0")

    # -- the selector thread -------------------------------------------------------

    def _loop(self) -> None:
        while True:
            try:
                if not self._round():
                    return
            except Exception:  # the thread must outlive any one watch's trouble
                log.exception("The IDLE selector stumbled; carrying on.")
                time.sleep(0.1)

    def _round(self) -> bool:
        """Wait once and dispatch what happened; False once the mux is closed."""
        timeout = 1.0
        if self._parked:
            timeout = max(0.0, min(1.0, min(self._parked.values()) - time.monotonic()))
        events = self._selector.select(timeout)
        with self._lock:
            if self._closed:
                return False
            incoming, self._incoming = self._incoming, []
            stopping, self._stopping = self._stopping, []
        for watch, deadline in incoming:
            if watch.stopping:
                self.submit(watch, watch.finish_idle)
                continue
            try:
                self._selector.register(watch.fd, selectors.EVENT_READ, watch)
            except (KeyError, ValueError, OSError) as exc:  # a socket closed meanwhile
                self.submit(watch, functools.partial(_raise, exc))
                continue
            self._set_parked(watch, deadline)
        for key, _mask in events:
            if key.data is None:
                with contextlib.suppress(BlockingIOError, OSError):
                    self._wake_r.recv(4096)
                continue
            watch = key.data
            if self._unpark(watch):
                self.submit(watch, watch.readable)
        for watch in stopping:
            if self._unpark(watch):  # else a work thread holds it and will see the flag
                self.submit(watch, watch.finish_idle)
        now = time.monotonic()
        for watch in [w for w, due in self._parked.items() if due <= now]:
            if self._unpark(watch):
                self.submit(watch, watch.renew)
        return True

    def _set_parked(self, watch: MuxWatcher, deadline: float) -> None:
        with self._lock:
            self._parked[watch] = deadline

    def _unpark(self, watch: MuxWatcher) -> bool:
        with self._lock:
            if self._parked.pop(watch, None) is None:
                return False
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(watch.fd)
        return True


class MuxWatcher(ImapWatcher):
    """An IDLE watch of one account served by an :class:`IdleMux` (see the module)."""

    def __init__(
        self,
        store: Store,
        account_id: int,
        *,
        mux: IdleMux,
        settings: Settings | None = None,
        renew_after: float = RENEW_AFTER,
        on_change: Callable[[ImapConnection, int], None] | None = None,
    ) -> None:
        super().__init__(
            store, account_id, settings=settings, renew_after=renew_after, on_change=on_change
        )
        self.mux = mux
        self.fd = -1  # the connection's socket, while there is one
        self._conn: ImapConnection | None = None
        self._folder: tuple[int, str] = (0, "")
        self._seen: tuple[object, ...] = CATCH_UP
        self._in_idle = False
        self._idle_at = 0.0  # monotonic time of the last IDLE
        self._done: Done | None = None
        self._ended = threading.Event()
        self._ended_lock = threading.Lock()

    # -- the supervisor's side --------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` was called."""
        return self._stop.is_set()

    def start(self, done: Done) -> None:
        """Begin watching in the background; ``done`` is called once when the watch ends."""
        self._done = done
        self.mux.submit(self, self._open)

    def stop(self) -> None:
        """Ask the watch to end (DONE, LOGOUT); thread-safe, returns at once."""
        self._stop.set()
        self.mux.wake(self)

    def run(self) -> None:
        """Watch until ``stop()`` (blocking, like :class:`ImapWatcher`); re-raises the failure."""
        failures: list[BaseException | None] = []
        self.start(failures.append)
        self._ended.wait()
        if failures and failures[0] is not None:
            raise failures[0]

    # -- steps (each runs on a work thread) -------------------------------------------

    def guarded(self, step: Callable[[], None]) -> None:
        """Run one step; any failure ends the watch with that failure."""
        try:
            step()
        except BaseException as exc:  # noqa: BLE001 - handed to the supervisor, never lost
            self._end(exc)

    def _open(self) -> None:
        if self.stopping:
            self._end(None)
            return
        self._conn = open_connection(self.store, self.account_id, settings=self.settings)
        self.fd = self._conn.client.socket().fileno()
        self._watch_state("watching")
        self.running.set()
        self._folder = self._inbox(self._conn)
        self._enter_idle()

    def _enter_idle(self) -> None:
        conn = self._live()
        folder_id, path = self._folder
        while not self.stopping:
            self._seen = self._settle(conn, folder_id, path, self._seen)
            if self.stopping:
                break
            conn.idle()
            self._in_idle = True
            self.idles += 1
            self._idle_at = time.monotonic()
            deadline = self._idle_at + self.renew_after
            # Responses that came right behind "+ idling" are already read: the socket
            # will not turn readable for them, so they are looked at here.
            if not interesting(conn.idle_check(0)):
                self.mux.park(self, deadline)
                return
            self._leave_idle(changed=True)
        self._finish()

    def readable(self) -> None:
        """The idling socket spoke: a change ends IDLE and syncs, anything else parks again."""
        conn = self._live()
        if self.stopping:
            self.finish_idle()
            return
        if interesting(conn.idle_check(0)):
            self._leave_idle(changed=True)
            self._enter_idle()
            return
        self.mux.park(self, self._idle_at + self.renew_after)

    def renew(self) -> None:
        """IDLE ran ``renew_after`` seconds: DONE and IDLE again (RFC 2177)."""
        self._leave_idle(changed=False)
        self._enter_idle()

    def finish_idle(self) -> None:
        """End IDLE and the connection after ``stop()``."""
        if self._in_idle and self._conn is not None and not self._conn.closed:
            self._leave_idle(changed=False)
        self._finish()

    # -- helpers ------------------------------------------------------------------------

    def _live(self) -> ImapConnection:
        assert self._conn is not None
        return self._conn

    def _leave_idle(self, *, changed: bool) -> None:
        conn = self._live()
        self._in_idle = False
        changed = interesting(conn.idle_done()) or changed
        if changed and not self.stopping:
            self._sync_inbox(conn, self._folder[0])

    def _finish(self) -> None:
        self._end(None)

    def _end(self, failure: BaseException | None) -> None:
        with self._ended_lock:
            if self._ended.is_set():
                return
            conn, self._conn = self._conn, None
            if conn is not None:
                if self._in_idle and not conn.closed:  # a failure outside IDLE's own steps
                    with contextlib.suppress(Exception):
                        conn.idle_done()
                conn.close()  # LOGOUT (a broken one was already dropped by its guard)
            try:
                if self.running.is_set():
                    self._watch_state("idle")
            except Exception:  # noqa: BLE001 - the watch's end is reported all the same
                log.exception("Could not record the end of account %s's watch.", self.account_id)
            finally:
                self.running.clear()
                self._ended.set()
        if self._done is not None:
            self._done(failure)


def _raise(exc: BaseException) -> None:
    raise exc


_shared: IdleMux | None = None
_shared_lock = threading.Lock()


def shared_mux() -> IdleMux:
    """The process's one multiplexer (created on first use; its threads are daemons)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = IdleMux()
        return _shared
