"""Ended web sessions and old sign-in failures are pruned by a periodic duty of the engine,
not only when someone signs in."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, select

from mailroom.config import Settings
from mailroom.jmap.auth import LockoutPolicy, SignInLimiter
from mailroom.jobs.runtime import Runtime
from mailroom.owners import get_or_create_user
from mailroom.store.engine import Store
from mailroom.store.models import SignInFailure, WebSession, utcnow
from mailroom.web.sessions import find_session, start_session
from tests.helpers import drain


def _count(store: Store, model: type[WebSession] | type[SignInFailure]) -> int:
    with store.session() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def test_the_engine_prunes_ended_sessions_and_old_failures(store: Store, tmp_path: Path) -> None:
    """One tick of the duties: ended sessions and failures past the window go, live ones stay."""
    now = utcnow()
    with store.session() as session:
        user_id = get_or_create_user(session).id
    # Newest first, so that no sign-in prunes the older rows on its own.
    live = start_session(store, user_id, now=now)
    ended = start_session(store, user_id, lifetime=timedelta(days=1), now=now - timedelta(days=2))
    policy = LockoutPolicy(window=timedelta(minutes=15))
    for minutes_ago in (1, 40, 50, 60):  # all but the first have left the window
        at = now - timedelta(minutes=minutes_ago)
        SignInLimiter(store, policy, lambda at=at: at).begin("me", "192.0.2.1")
    assert (_count(store, WebSession), _count(store, SignInFailure)) == (2, 8)
    assert find_session(store, ended, now) is None  # ended, though its row is still there

    runtime = Runtime(store, Settings(data_dir=tmp_path, signin_lockout_minutes=15))
    try:
        runtime.duties.tick(0.0)  # every duty is due at the first tick
        assert drain(runtime.queues["ingest"]) >= 1
    finally:
        runtime.stop()
    assert (_count(store, WebSession), _count(store, SignInFailure)) == (1, 2)
    signed_in = find_session(store, live)
    assert signed_in is not None and signed_in.user_id == user_id


def test_the_prune_task_counts_what_it_deleted(store: Store, tmp_path: Path) -> None:
    """The task alone, with the lock-out window the operator set (5 minutes here)."""
    now = utcnow()
    with store.session() as session:
        user_id = get_or_create_user(session).id
    start_session(store, user_id, lifetime=timedelta(hours=1), now=now - timedelta(hours=2))
    policy = LockoutPolicy(window=timedelta(minutes=5))
    SignInLimiter(store, policy, lambda: now - timedelta(minutes=1)).begin("me", None)
    SignInLimiter(store, policy, lambda: now - timedelta(minutes=10)).begin("me", None)
    runtime = Runtime(store, Settings(data_dir=tmp_path, signin_lockout_minutes=5))
    try:
        assert runtime.jobs.run_prune_sign_ins() == 1 + 2  # one session, one attempt's 2 rows
        assert runtime.jobs.run_prune_sign_ins() == 0
    finally:
        runtime.stop()
    assert _count(store, SignInFailure) == 2
