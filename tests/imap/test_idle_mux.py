"""Many IDLE watches on one selector thread, against the real Dovecot, on both stores."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mailroom.config import Settings
from mailroom.jobs.leases import LocalLeases
from mailroom.jobs.supervisor import Supervisor, SupervisorConfig
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.imap import MuxWatcher, add_imap_account, sync_account
from mailroom.providers.imap.idle_mux import IdleMux
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.factories import make_message
from tests.imap.conftest import add_account, new_mailbox
from tests.imap.test_faults import proxied, proxy  # noqa: F401 - fixtures shared
from tests.imap.views import Mailbox, message_ids
from tests.support.dovecot import DovecotServer
from tests.support.tcpproxy import FaultyProxy

WATCHES = 24
WORKERS = 4


def _wait_for(condition: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


class Ends:
    """Collects how each watch ended (the ``done`` callback)."""

    def __init__(self) -> None:
        self.failures: dict[int, BaseException | None] = {}
        self._lock = threading.Lock()

    def for_(self, account: int) -> Callable[[BaseException | None], None]:
        def done(failure: BaseException | None) -> None:
            with self._lock:
                assert account not in self.failures, "done called twice"
                self.failures[account] = failure

        return done


@pytest.fixture
def mux() -> Iterator[IdleMux]:
    """A private multiplexer with a few work threads, closed after the test."""
    made = IdleMux(workers=WORKERS, name="test-idle")
    yield made
    made.close()


def _refused(
    store: Store, settings: Settings, dovecot: DovecotServer, login: str, name: str
) -> int:
    """An account whose password the server refuses."""
    return add_imap_account(
        store,
        settings,
        name=name,
        host=dovecot.host,
        port=dovecot.port,
        tls="none",
        login=login,
        password="not-the-password",
    )


def _state(store: Store, account: int) -> tuple[str, str]:
    with store.session() as session:
        row = session.get(Account, account)
        assert row is not None
        return row.status, row.watch_state


def test_dozens_of_watches_share_one_selector_and_see_new_mail(
    store: Store, settings: Settings, dovecot: DovecotServer, mux: IdleMux
) -> None:
    """Two dozen accounts idle on one selector and a few workers; mail lands; stop is clean."""
    boxes = [new_mailbox(dovecot) for _ in range(WATCHES)]
    accounts = [add_account(store, settings, box, name=f"m{i}") for i, box in enumerate(boxes)]
    threads_before = threading.active_count()
    ends = Ends()
    watchers = [MuxWatcher(store, a, settings=settings, mux=mux) for a in accounts]
    for account, watcher in zip(accounts, watchers, strict=True):
        watcher.start(ends.for_(account))
    assert _wait_for(lambda: mux.idling() == WATCHES), (mux.idling(), ends.failures)
    # One selector thread and the work pool, however many accounts are watched.
    assert threading.active_count() - threads_before <= WORKERS + 1
    assert all(_state(store, a) == ("active", "watching") for a in accounts)
    for index in range(0, WATCHES, 3):
        boxes[index].append("INBOX", make_message(f"mux{index}@x", subject=f"Mux {index}"))
    for index in range(0, WATCHES, 3):
        account = accounts[index]
        assert _wait_for(lambda a=account, i=index: f"mux{i}@x" in message_ids(store, a)), index
    assert _wait_for(lambda: mux.idling() == WATCHES)  # back in IDLE after syncing
    assert not ends.failures
    for watcher in watchers:
        watcher.stop()
    assert _wait_for(lambda: len(ends.failures) == WATCHES)
    assert all(failure is None for failure in ends.failures.values())
    assert mux.idling() == 0
    assert all(_state(store, a) == ("active", "idle") for a in accounts)


def test_idle_is_reissued_on_the_mux_and_still_sees_mail(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, mux: IdleMux
) -> None:
    """With a short renewal the multiplexed watch re-issues IDLE and keeps noticing mail."""
    watcher = MuxWatcher(store, account, settings=settings, mux=mux, renew_after=0.3)
    ends = Ends()
    watcher.start(ends.for_(account))
    assert _wait_for(lambda: watcher.idles >= 4), ends.failures
    mailbox.append("INBOX", make_message("renewed@x"))
    assert _wait_for(lambda: "renewed@x" in message_ids(store, account)), ends.failures
    watcher.stop()
    assert _wait_for(lambda: account in ends.failures)
    assert ends.failures[account] is None


def test_a_dropped_connection_ends_the_muxed_watch_with_a_transient_error(
    store: Store, settings: Settings, mux: IdleMux, request: pytest.FixtureRequest
) -> None:
    """A connection the server side drops during IDLE ends the watch with TransientError."""
    account: int = request.getfixturevalue("proxied")  # the fixtures of test_faults
    faulty: FaultyProxy = request.getfixturevalue("proxy")
    sync_account(store, account, settings=settings)
    ends = Ends()
    MuxWatcher(store, account, settings=settings, mux=mux).start(ends.for_(account))
    assert _wait_for(lambda: mux.idling() == 1), ends.failures
    faulty.drop_all()
    assert _wait_for(lambda: account in ends.failures)
    assert isinstance(ends.failures[account], TransientError)
    assert mux.idling() == 0
    assert _state(store, account) == ("active", "idle")


def test_supervisor_on_the_mux_leases_auth_errors_and_shutdown(
    store: Store, settings: Settings, dovecot: DovecotServer, mux: IdleMux
) -> None:
    """The supervisor runs muxed watches: a refused login is auth_error, a lost lease ends one."""
    boxes = [new_mailbox(dovecot) for _ in range(3)]
    good = [add_account(store, settings, box, name=f"s{i}") for i, box in enumerate(boxes)]
    bad = _refused(store, settings, dovecot, boxes[0].user, "bad")
    now = [1000.0]
    leases = LocalLeases(lambda: now[0])
    supervisor = Supervisor(
        store,
        watcher_for=lambda a: MuxWatcher(store, a, settings=settings, mux=mux),
        poll=lambda _a: None,
        leases=leases,
        config=SupervisorConfig(lease_ttl=90),
    )
    try:
        supervisor.tick(now[0])
        assert _wait_for(lambda: mux.idling() == 3)
        assert _wait_for(lambda: supervisor._watches[bad].ended)  # the refused login
        supervisor.tick(now[0])
        assert _state(store, bad) == ("auth_error", "idle")
        assert supervisor.watching() == good
        # Another process takes one account's lease: its renewal, due now, fails.
        stolen = f"watch:{good[0]}"
        leases.release(stolen, _token(supervisor, good[0]))
        assert leases.acquire(stolen, 90) is not None
        now[0] += 31
        supervisor.tick(now[0])
        assert supervisor.watching() == good[1:]
        assert mux.idling() == 2  # its connection was closed, the others idle on
        assert _state(store, good[0]) == ("active", "idle")
    finally:
        supervisor.stop()
    assert mux.idling() == 0
    assert all(_state(store, a) == ("active", "idle") for a in good)


def _token(supervisor: Supervisor, account: int) -> str:
    token = supervisor._watches[account].lease_token
    assert token is not None
    return token


def test_run_blocks_and_raises_a_refused_login(
    store: Store, settings: Settings, dovecot: DovecotServer, mux: IdleMux
) -> None:
    """MuxWatcher.run() blocks like the threaded watcher and raises AuthError for a bad password."""
    account = _refused(store, settings, dovecot, new_mailbox(dovecot).user, "refused")
    with pytest.raises(AuthError):
        MuxWatcher(store, account, settings=settings, mux=mux).run()
    assert _state(store, account) == ("auth_error", "idle")
