"""The lane worker: hands due submissions of one lane to their transports, exactly per SPEC §11.

One run of :meth:`Sender.run_lane` (the body of the ``send_<lane>`` job):

1. **Unknown hand-offs first.** A submission still ``sending`` :data:`HANDOFF_TIMEOUT`
   after its hand-off began belongs to a worker that died mid-send. The server
   may have accepted it, and SMTP cannot be asked, so it is never handed over
   again on its own: it goes to ``failed_sends`` with a reason saying it may
   have been delivered (``mailroom outbound retry`` is the operator's decision).
2. **Throttled lanes** (``urgent``, ``calm`` while pacing is on): a submission
   not sent :data:`THROTTLED_WINDOW` (6 hours) after it was due goes to
   ``failed_sends``.
3. **Due submissions, oldest due first, in batches** of up to :data:`BATCH`:
   on a throttled lane the batch takes its tokens of the lane's bucket first
   (:mod:`mailroom.outbound.pace`, as many as there is due mail; what is not
   handed over is given back); an empty bucket ends the run (the job comes
   back when the next token is there) and charges nobody. One statement claims
   the batch — state ``sending``, rows locked ``FOR UPDATE SKIP LOCKED`` on
   PostgreSQL (SQLite has one writer anyway), so two workers never claim the
   same message. Then each one in turn gets its ``handoff_at`` *committed
   before* its hand-off (in the transaction that also commits the outcome of
   the one before), and is handed over once.

A claimed submission without ``handoff_at`` was never handed over: one whose
worker died before its turn is queued again by the sweep after
:data:`CLAIM_LEASE`, and a worker whose claim went stale that way finds out
when it tries to start it (the start is guarded by the claim's moment).

The outcome of one hand-off::

    accepted (some recipient)      -> sent; AFTER_SENT hooks (outbound.hooks)
    RefusedError (5xx), any lane   -> failed at once
    AuthError / no transport       -> failed at once: the account needs its owner
    TransientError (4xx, connection, RateLimitError):
        throttled lane   -> a deferral, not an attempt: queued again after a
                            growing pause (or the server's retry_after), until
                            the 6-hour window closes, then failed
        unthrottled lane -> an attempt: queued again after 30 s, then 2 min;
                            the third failed attempt -> failed
    anything else (a bug)          -> an attempt on every lane (never 6 hours of silence)

Which rule applies follows from the lane the submission sits in and the
operator's pacing switch, never from its kind. A sealed submission
(:mod:`mailroom.outbound.sealed_queue`) is opened when it is claimed, and its
new delivery status, last error and failed-sends reason are sealed as they
are written. Every change of state or
delivery status writes the EmailSubmission ``updated`` change row in the same
transaction. Connections are kept per account for one run and closed after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, case, delete, func, or_, select, update
from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.crypto.mail_reading import open_blob
from mailroom.errors import ConfigError
from mailroom.metrics import catalogue
from mailroom.outbound.base import RefusedError, SendResult, Transport
from mailroom.outbound.hooks import AFTER_SENT
from mailroom.outbound.lanes import LANES
from mailroom.outbound.pace import Pace, pace_for, throttled
from mailroom.outbound.queueing import WAITING, record_submission_change
from mailroom.outbound.sealed_queue import SUBMISSIONS, read_value, seal_values, write_sealed
from mailroom.providers.base import AuthError, RateLimitError, TransientError
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.engine import Store
from mailroom.store.models import Account, Blob, FailedSend, Submission, utcnow

__all__ = [
    "BATCH",
    "CLAIM_LEASE",
    "HANDOFF_TIMEOUT",
    "MAX_ATTEMPTS",
    "THROTTLED_WINDOW",
    "Sender",
    "TransportFactory",
    "attempt_backoff",
    "deferral_pause",
]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # unthrottled lanes (SPEC §11)
THROTTLED_WINDOW = timedelta(hours=6)  # throttled lanes retry this long after being due
# Longer than any hand-off can last (SMTP waits up to 10 minutes for the reply to DATA).
HANDOFF_TIMEOUT = timedelta(minutes=30)
# Claimed but never started (its worker died before its turn): queued again after this.
CLAIM_LEASE = timedelta(minutes=5)
BATCH = 50  # submissions claimed per transaction
SLOW_DOWN = timedelta(minutes=1)  # the lane's pause after a server asked to slow down

TransportFactory = Callable[[Session, Account, Settings], Transport]

# The statements run once per message, built once, on the tables (no ORM bookkeeping).
_TABLE = cast(Table, Submission.__table__)
_COLUMNS = _TABLE.c
_MOMENT = bindparam("moment", type_=_COLUMNS.updated_at.type)
_UNSTARTED = (  # the claim made at "claimed" is still ours and not yet started
    _COLUMNS.id == bindparam("sid"),
    _COLUMNS.state == "sending",
    _COLUMNS.handoff_at.is_(None),
    _COLUMNS.updated_at == bindparam("claimed", type_=_COLUMNS.updated_at.type),
)
_START = update(_TABLE).where(*_UNSTARTED).values(handoff_at=_MOMENT, updated_at=_MOMENT)
_RELEASE = update(_TABLE).where(*_UNSTARTED).values(state="queued", updated_at=_MOMENT)
_RAW = select(Blob.__table__.c.data, Blob.__table__.c.user_id).where(
    Blob.__table__.c.sha256 == bindparam("sha")
)


def attempt_backoff(attempts: int) -> timedelta:
    """The pause after the ``attempts``-th failed attempt of an unthrottled lane: 30 s, 2 min."""
    return timedelta(seconds=30 * 4 ** max(attempts - 1, 0))


def deferral_pause(deferrals: int) -> timedelta:
    """The pause after the ``deferrals``-th deferral of a throttled lane: 1 min doubling to 30."""
    return timedelta(seconds=min(60 * 2 ** max(deferrals - 1, 0), 1800))


@dataclass(frozen=True)
class _Claim:
    """What one hand-off needs, read when the submission was claimed (ids, not entities).

    ``raw`` and ``handoff_at`` are filled when its hand-off starts (:meth:`Sender._start`).
    """

    id: int
    user_id: int
    account_id: int
    lane: str
    message_id: str
    raw_sha256: str
    envelope: dict[str, Any]
    attempts: int
    deferrals: int
    due: datetime  # send_at: the throttled window runs from here
    claimed_at: datetime
    sealed: bool = False  # its replies and failure are written sealed (outbound.sealed_queue)
    raw: bytes = b""
    handoff_at: datetime | None = None

    @property
    def recipients(self) -> list[str]:
        return [str(item["email"]) for item in self.envelope.get("rcptTo", [])]


@dataclass(frozen=True)
class _Outcome:
    """What came of one hand-off: the submission's new values, and a failed-sends entry."""

    values: dict[str, Any]
    reason: str | None = None  # set: the submission failed (``failed_sends``)
    sent: bool = False


@dataclass
class _Run:
    """The transports of one run, per account (one kept connection each)."""

    transports: dict[int, Transport] = field(default_factory=dict)
    handed: int = 0
    stop: bool = False

    def close(self) -> None:
        for transport in self.transports.values():
            try:
                transport.close()
            except Exception:  # closing is best effort; the run's outcome stands
                log.exception("Closing a transport failed")
        self.transports.clear()


def _status(recipients: Sequence[str], reply: str, delivered: str) -> dict[str, Any]:
    return {
        r: {"smtpReply": reply, "delivered": delivered, "displayed": "unknown"} for r in recipients
    }


def _failure(
    recipients: Sequence[str],
    reason: str,
    code: int | None,
    reply: str | None,
    attempts: int,
    delivered: str = "no",
) -> dict[str, Any]:
    """The values of a submission that failed."""
    return {
        "state": "failed",
        "next_attempt_at": None,
        "last_code": code,
        "last_error": reason[:2000],
        "delivery_status": _status(recipients, reply or f"{code or 554} {reason}", delivered),
        "attempts": attempts,
    }


def _put_back(
    claim: _Claim, error: BaseException, code: int, reply: str, at: datetime, **counted: int
) -> _Outcome:
    """Queued again for ``at``, with the failure's reply and the count it adds."""
    values = {
        "state": "queued",
        "next_attempt_at": at,
        "last_code": code,
        "last_error": str(error)[:2000],
        "delivery_status": _status(claim.recipients, reply, "queued"),
        **counted,
    }
    return _Outcome(values)


def _reply_of(error: BaseException, default_code: int) -> tuple[int, str]:
    """The SMTP-like reply a failure stands for: the server's, or one made of its sentence."""
    code = getattr(error, "code", None)
    reply = getattr(error, "reply", "")
    if isinstance(code, int) and reply:
        return code, str(reply)
    if isinstance(code, int):
        return code, f"{code} {error}"
    return default_code, f"{default_code} {error}"


class Sender:
    """Sends the due submissions of a lane (see the module docstring for the rules)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utcnow,
        transports: TransportFactory | None = None,
        pace: Pace | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        if transports is None:
            from mailroom.outbound.transports import transport_for

            transports = transport_for
        self.transports = transports
        self.pace: Pace = pace or pace_for(store, settings)
        # Seconds the lane waits before its next run, after a run its empty bucket ended
        # (until the next token) or a server's request to slow down ended.
        self.lane_pause: dict[str, float] = {}

    def close(self) -> None:
        """Release the pace's connections."""
        self.pace.close()

    # -- one run -------------------------------------------------------------------

    def run_lane(self, lane: str, *, limit: int | None = None) -> int:
        """Hand over the due submissions of ``lane`` (module docstring); how many went."""
        if lane not in LANES:
            raise ConfigError(
                f"There is no lane called {lane!r}; the lanes are {', '.join(LANES)}."
            )
        paced = throttled(lane, self.settings)
        self.lane_pause.pop(lane, None)
        self._sweep(lane, paced)
        run = _Run()
        try:
            while not run.stop and (limit is None or run.handed < limit):
                want = BATCH if limit is None else min(BATCH, limit - run.handed)
                claims = self._claim_batch(lane, want, paced)
                if not claims:
                    break
                self._hand_over_batch(claims, paced, run)
        finally:
            run.close()
        return run.handed

    def _claim_batch(self, lane: str, want: int, paced: bool) -> list[_Claim]:
        """Claim up to ``want`` due submissions (on a throttled lane: as many as it has tokens)."""
        now = self.clock()
        if paced:
            due = self._due_count(lane, want, now)
            if not due:
                return []
            want, wait = self.pace.take_up_to(lane, now, due)
            if not want:
                self.lane_pause[lane] = wait
                return []
        claims = self._claim(lane, want, now)
        if paced and len(claims) < want:  # another worker was faster
            self.pace.give_back(lane, self.clock(), want - len(claims))
        return claims

    def _due_query(self, lane: str, count: int, moment: datetime) -> Any:
        return (
            select(Submission.id)
            .where(
                Submission.lane == lane,
                Submission.state.in_(WAITING),
                Submission.next_attempt_at <= moment,
            )
            .order_by(Submission.next_attempt_at, Submission.id)
            .limit(count)
        )

    def _due_count(self, lane: str, count: int, moment: datetime) -> int:
        with self.store.session() as session:
            return len(session.scalars(self._due_query(lane, count, moment)).all())

    def _claim(self, lane: str, count: int, moment: datetime) -> list[_Claim]:
        """Commit up to ``count`` due submissions as ``sending`` (not yet started), oldest first."""
        with self.store.session() as session:
            due = self._due_query(lane, count, moment)
            if session.get_bind().dialect.name == "postgresql":
                due = due.with_for_update(skip_locked=True)
            result = session.execute(
                update(Submission)
                .where(Submission.id.in_(due), Submission.state.in_(WAITING))
                .values(state="sending", handoff_at=None, updated_at=moment)
                .returning(
                    Submission.id,
                    Submission.user_id,
                    Submission.account_id,
                    Submission.message_id,
                    Submission.raw_sha256,
                    Submission.envelope,
                    Submission.attempts,
                    Submission.deferrals,
                    Submission.send_at,
                    Submission.next_attempt_at,
                    Submission.sealed,
                )
                .execution_options(synchronize_session=False)
            )
            rows = sorted(result, key=lambda row: (row.next_attempt_at, row.id))
            by_user: dict[int, list[int]] = {}
            for row in rows:
                by_user.setdefault(row.user_id, []).append(row.id)
            for user_id, ids in by_user.items():
                record_submission_change(session, user_id, ids)
            return [self._claim_of(session, row, lane, moment) for row in rows]

    @staticmethod
    def _claim_of(session: Session, row: Any, lane: str, moment: datetime) -> _Claim:
        """The claim of one claimed row, its sealed Message-ID and envelope opened."""

        def clear(column: str) -> Any:
            value = getattr(row, column)
            return read_value(session, row.user_id, SUBMISSIONS, column, row.id, value, row.sealed)

        return _Claim(
            id=row.id,
            user_id=row.user_id,
            account_id=row.account_id,
            lane=lane,
            message_id=clear("message_id"),
            raw_sha256=row.raw_sha256,
            envelope=dict(clear("envelope")),
            attempts=row.attempts,
            deferrals=row.deferrals,
            due=row.send_at,
            claimed_at=moment,
            sealed=bool(row.sealed),
        )

    def _start(self, session: Session, claim: _Claim) -> _Claim | None:
        """Set the hand-off moment of a claim still ours, and read its bytes (None: not ours)."""
        moment = self.clock()
        connection = session.connection()
        params = {"sid": claim.id, "claimed": claim.claimed_at, "moment": moment}
        if not connection.execute(_START, params).rowcount:
            return None
        found = connection.execute(_RAW, {"sha": claim.raw_sha256}).first()
        raw = None
        if found is not None:  # sealed bytes (crypto.mail_reading) are opened here
            raw = open_blob(session, claim.raw_sha256, found.data, found.user_id)
        return replace(claim, raw=raw or b"", handoff_at=moment)

    def _hand_over_batch(self, claims: list[_Claim], paced: bool, run: _Run) -> None:
        """Start, hand over and settle each claim in turn, one transaction per message.

        The outcome of one hand-off commits together with the start of the next;
        the after-sent hooks run once that commit is done.
        """
        pending: tuple[_Claim, _Outcome] | None = None
        for index, claim in enumerate(claims):
            if run.stop:  # the server asked to slow down: the rest waits, uncharged
                self._release(claims[index:], paced)
                break
            with self.store.session() as session:
                sent = self._write(session, *pending) if pending is not None else None
                started = self._start(session, claim)
            pending = None
            if sent is not None:
                self._after_sent(sent)
            if started is None:  # the sweep took the claim for stale: it is queued again
                if paced:
                    self.pace.give_back(claim.lane, self.clock())
                continue
            run.handed += 1
            pending = (started, self._hand_over(started, paced, run))
            outcome = pending[1]
            catalogue.handoff(claim.lane, sent=outcome.sent, failed=outcome.reason is not None)
        if pending is not None:
            with self.store.session() as session:
                sent = self._write(session, *pending)
            if sent is not None:
                self._after_sent(sent)

    def _release(self, claims: list[_Claim], paced: bool) -> None:
        """Queue claims never started again as they were (no attempt, no deferral)."""
        with self.store.session() as session:
            connection = session.connection()
            for claim in claims:
                params = {"sid": claim.id, "claimed": claim.claimed_at, "moment": self.clock()}
                if connection.execute(_RELEASE, params).rowcount:
                    record_submission_change(session, claim.user_id, [claim.id])
        if paced and claims:
            self.pace.give_back(claims[0].lane, self.clock(), len(claims))

    def _transport(self, account_id: int, run: _Run) -> Transport:
        transport = run.transports.get(account_id)
        if transport is None:
            with self.store.session() as session:
                account = session.get(Account, account_id)
                if account is None:
                    raise ConfigError("The account of this message no longer exists.")
                transport = self.transports(session, account, self.settings)
            run.transports[account_id] = transport
        return transport

    def _hand_over(self, claim: _Claim, paced: bool, run: _Run) -> _Outcome:
        """Hand one started submission over; what came of it (module docstring)."""
        try:
            transport = self._transport(claim.account_id, run)
            mail_from = str(claim.envelope.get("mailFrom", {}).get("email", ""))
            result = transport.send(
                mail_from, claim.recipients, claim.raw, message_id=claim.message_id
            )
        except RefusedError as error:
            code, reply = _reply_of(error, 550)
            return self._fail(claim, str(error), code, reply)
        except (AuthError, ConfigError) as error:  # the account needs its owner
            return self._fail(claim, str(error))
        except TransientError as error:
            if isinstance(error, RateLimitError):  # the server asked the lane to slow down
                run.stop = True
                pause = float(error.retry_after or SLOW_DOWN.total_seconds())
                self.lane_pause[claim.lane] = pause
            return self._defer(claim, error) if paced else self._count_attempt(claim, error)
        except Exception as error:  # a transport's bug: counted, so it ends in the failed list
            log.exception("Sending submission %s failed unexpectedly", claim.id)
            broken = run.transports.pop(claim.account_id, None)
            if broken is not None:
                _Run({claim.account_id: broken}).close()
            return self._count_attempt(claim, error)
        return self._sent(claim, result)

    # -- outcomes ------------------------------------------------------------------

    def _write(self, session: Session, claim: _Claim, outcome: _Outcome) -> int | None:
        """Commit an outcome to the hand-off ``claim`` made (not a later one); its id when sent."""
        values = outcome.values
        if claim.sealed:
            values = seal_values(session, claim.user_id, SUBMISSIONS, claim.id, values)
        result = session.connection().execute(
            update(_TABLE)
            .where(_COLUMNS.id == claim.id, _COLUMNS.handoff_at == claim.handoff_at)
            .values(updated_at=self.clock(), **values)
        )
        if not result.rowcount:
            return None
        record_submission_change(session, claim.user_id, [claim.id])
        if outcome.reason is not None:
            self._record_failure(
                session,
                claim.id,
                claim.lane,
                outcome.values["attempts"],
                outcome.reason,
                outcome.values["last_code"],
                owner=claim.user_id,
                sealed=claim.sealed,
            )
        if not outcome.sent:
            return None
        # A hand-off the sweep took for unknown (a very slow server) did deliver after all.
        assert claim.handoff_at is not None
        if self.clock() - claim.handoff_at >= HANDOFF_TIMEOUT:
            session.execute(delete(FailedSend).where(FailedSend.submission_id == claim.id))
        return claim.id

    def _sent(self, claim: _Claim, result: SendResult) -> _Outcome:
        accepted = {key.lower(): reply for key, reply in result.accepted.items()}
        refused = {key.lower(): value for key, value in result.refused.items()}
        status: dict[str, Any] = {}
        for recipient in claim.recipients:
            if recipient.lower() in refused:
                status.update(_status([recipient], refused[recipient.lower()][1], "no"))
            else:
                reply = accepted.get(recipient.lower()) or next(iter(accepted.values()), "250")
                status.update(_status([recipient], reply, "queued"))
        values = {
            "state": "sent",
            "sent_at": self.clock(),
            "next_attempt_at": None,
            "last_code": 250,
            "last_error": None,
            "delivery_status": status,
        }
        return _Outcome(values, sent=True)

    def _after_sent(self, submission_id: int) -> None:
        for hook in list(AFTER_SENT):
            try:
                hook(self.store, submission_id)
            except Exception:
                name = getattr(hook, "__name__", repr(hook))
                log.exception("After-sent hook %s failed for submission %s", name, submission_id)

    def _fail(
        self,
        claim: _Claim,
        reason: str,
        code: int | None = None,
        reply: str | None = None,
        *,
        attempts: int | None = None,
    ) -> _Outcome:
        values = _failure(
            claim.recipients, reason, code, reply, claim.attempts if attempts is None else attempts
        )
        return _Outcome(values, reason=reason)

    def _record_failure(
        self,
        session: Session,
        submission_id: int,
        lane: str,
        attempts: int,
        reason: str,
        code: int | None,
        *,
        owner: int,
        sealed: bool,
    ) -> None:
        """Put one failed submission on the failed-sends list (in ``session``).

        The reason of a sealed submission is sealed (inserted empty, written by id), and
        the log says only that it failed: the reason quotes the recipients.
        """
        failed = {
            "submission_id": submission_id,
            "lane": lane,
            "attempts": attempts,
            "code": code,
            "reason": "" if sealed else reason[:2000],
            "failed_at": self.clock(),
        }
        made = insert_ignoring_conflicts(
            session, FailedSend, [failed], conflict=["submission_id"], returning=["id"]
        )
        if sealed and made:
            write_sealed(session, FailedSend, owner, {made[0][0]: {"reason": reason[:2000]}})
        shown = "its reason is sealed (mailroom outbound failed shows it)" if sealed else reason
        log.warning("Submission %s failed: %s", submission_id, shown)

    def _fail_in(
        self,
        session: Session,
        submission_id: int,
        reason: str,
        *,
        reply: str | None = None,
        delivered: str = "no",
    ) -> None:
        """Move one submission found by the sweep to ``failed`` and the failed-sends list."""
        row = session.get(Submission, submission_id)  # opened as it loads when sealed
        if row is None:
            return
        recipients = [str(item["email"]) for item in row.envelope.get("rcptTo", [])]
        values = _failure(recipients, reason, None, reply, row.attempts, delivered)
        if row.sealed:
            values = seal_values(session, row.user_id, SUBMISSIONS, submission_id, values)
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id)
            .values(updated_at=self.clock(), **values)
            .execution_options(synchronize_session=False)
        )
        record_submission_change(session, row.user_id, [submission_id])
        self._record_failure(
            session,
            submission_id,
            row.lane,
            row.attempts,
            reason,
            None,
            owner=row.user_id,
            sealed=row.sealed,
        )

    def _defer(self, claim: _Claim, error: TransientError) -> _Outcome:
        """A throttled lane's temporary failure: wait and try again, not an attempt."""
        now = self.clock()
        code, reply = _reply_of(error, 451)
        deadline = claim.due + THROTTLED_WINDOW
        if now >= deadline:
            return self._fail(claim, _window_closed(str(error)), code, reply)
        deferrals = claim.deferrals + 1
        retry_after = getattr(error, "retry_after", None)
        pause = timedelta(seconds=float(retry_after)) if retry_after else deferral_pause(deferrals)
        return _put_back(claim, error, code, reply, min(now + pause, deadline), deferrals=deferrals)

    def _count_attempt(self, claim: _Claim, error: BaseException) -> _Outcome:
        """An unthrottled lane's failure (or any lane's bug): one attempt of three."""
        now = self.clock()
        code, reply = _reply_of(error, 451)
        attempts = claim.attempts + 1
        if attempts >= MAX_ATTEMPTS:
            reason = f"Gave up after {attempts} attempts (the last: {str(error).rstrip('.')})."
            return self._fail(claim, reason, code, reply, attempts=attempts)
        pause = attempt_backoff(attempts)
        retry_after = getattr(error, "retry_after", None)
        if retry_after:
            pause = max(pause, timedelta(seconds=float(retry_after)))
        return _put_back(claim, error, code, reply, now + pause, attempts=attempts)

    # -- sweeps at the start of a run ------------------------------------------------

    def _sweep(self, lane: str, paced: bool) -> None:
        """Steps 1 and 2: fail unknown hand-offs and (throttled lanes) mail past its window.

        Stale claims (never started) are queued again.
        """
        now = self.clock()
        sending = Submission.state == "sending"
        unknown = sending & (Submission.handoff_at <= now - HANDOFF_TIMEOUT)
        stale = (
            sending & Submission.handoff_at.is_(None) & (Submission.updated_at <= now - CLAIM_LEASE)
        )
        late = Submission.state.in_(WAITING) & (Submission.send_at <= now - THROTTLED_WINDOW)
        wanted = or_(unknown, stale, late) if paced else or_(unknown, stale)
        with self.store.session() as session:
            rows = session.execute(
                select(
                    Submission.id,
                    Submission.user_id,
                    Submission.state,
                    Submission.handoff_at,
                    Submission.last_error,
                    Submission.sealed,
                )
                .where(Submission.lane == lane, wanted)
                .order_by(Submission.id)
            ).all()
            for row in rows:
                if row.state != "sending":
                    last = read_value(
                        session,
                        row.user_id,
                        SUBMISSIONS,
                        "last_error",
                        row.id,
                        row.last_error,
                        row.sealed,
                    )
                    last = last or f"the {lane} lane's pace left no room"
                    self._fail_in(session, row.id, _window_closed(last))
                elif row.handoff_at is None:  # claimed by a worker that died before its turn
                    session.execute(
                        update(Submission)
                        .where(Submission.id == row.id)
                        .values(state="queued", updated_at=now)
                        .execution_options(synchronize_session=False)
                    )
                    record_submission_change(session, row.user_id, [row.id])
                else:
                    reason = (
                        f"The worker stopped while handing this message over at "
                        f"{row.handoff_at:%Y-%m-%d %H:%M} UTC, so the server may have accepted "
                        "it and it is not sent again on its own (ask the recipient, then "
                        f"`mailroom outbound retry {row.id}` if it is missing)."
                    )
                    self._fail_in(
                        session, row.id, reason, reply="451 4.4.0 hand-off", delivered="unknown"
                    )

    # -- for the job and the duty ----------------------------------------------------

    def next_due(self, lane: str) -> datetime | None:
        """When ``lane`` has work next: due mail, a hand-off turning unknown, a claim gone stale."""
        sending = Submission.state == "sending"
        with self.store.session() as session:
            waiting, handoff, claimed = session.execute(
                select(
                    func.min(case((Submission.state.in_(WAITING), Submission.next_attempt_at))),
                    func.min(case((sending, Submission.handoff_at))),
                    func.min(
                        case(
                            (and_(sending, Submission.handoff_at.is_(None)), Submission.updated_at)
                        )
                    ),
                ).where(Submission.lane == lane, Submission.state.in_((*WAITING, "sending")))
            ).one()
        moments = [
            waiting,
            handoff + HANDOFF_TIMEOUT if handoff is not None else None,
            claimed + CLAIM_LEASE if claimed is not None else None,
        ]
        return min((m for m in moments if m is not None), default=None)

    def lanes_with_work(self) -> list[str]:
        """The lanes with something to do now (due, past the window, an unknown hand-off)."""
        now = self.clock()
        return [lane for lane in LANES if (due := self.next_due(lane)) is not None and due <= now]


def _window_closed(last: str) -> str:
    hours = int(THROTTLED_WINDOW.total_seconds() // 3600)
    return f"Not sent within {hours} hours of being due (the last reason: {last.rstrip('.')})."
