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
3. **Due submissions, oldest due first**: on a throttled lane each takes a
   token of the lane's bucket first (:mod:`mailroom.outbound.pace`); an empty
   bucket ends the run (the job comes back when the next token is there) and
   charges nobody. Then the submission is claimed — state ``sending`` and
   ``handoff_at`` *committed before* the hand-off, by a guarded UPDATE, so two
   workers never hand over the same message — and handed over once.

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
operator's pacing switch, never from its kind. Every change of state or
delivery status writes the EmailSubmission ``updated`` change row in the same
transaction. Connections are kept per account for one run and closed after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.outbound.base import RefusedError, SendResult, Transport
from mailroom.outbound.hooks import AFTER_SENT
from mailroom.outbound.lanes import LANES
from mailroom.outbound.pace import Pace, pace_for, throttled
from mailroom.outbound.queueing import WAITING, record_submission_change
from mailroom.providers.base import AuthError, RateLimitError, TransientError
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.engine import Store
from mailroom.store.models import Account, Blob, FailedSend, Submission, utcnow

__all__ = [
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
SLOW_DOWN = timedelta(minutes=1)  # the lane's pause after a server asked to slow down

TransportFactory = Callable[[Session, Account, Settings], Transport]


def attempt_backoff(attempts: int) -> timedelta:
    """The pause after the ``attempts``-th failed attempt of an unthrottled lane: 30 s, 2 min."""
    return timedelta(seconds=30 * 4 ** max(attempts - 1, 0))


def deferral_pause(deferrals: int) -> timedelta:
    """The pause after the ``deferrals``-th deferral of a throttled lane: 1 min doubling to 30."""
    return timedelta(seconds=min(60 * 2 ** max(deferrals - 1, 0), 1800))


@dataclass(frozen=True)
class _Claim:
    """What one hand-off needs, read when the submission was claimed (ids, not entities)."""

    id: int
    user_id: int
    account_id: int
    message_id: str
    raw: bytes
    envelope: dict[str, Any]
    attempts: int
    deferrals: int
    due: datetime  # send_at: the throttled window runs from here
    handoff_at: datetime

    @property
    def recipients(self) -> list[str]:
        return [str(item["email"]) for item in self.envelope.get("rcptTo", [])]


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
                candidate = self._next_due(lane)
                if candidate is None:
                    break
                if paced:
                    wait = self.pace.take(lane, self.clock())
                    if wait > 0:
                        self.lane_pause[lane] = wait
                        break
                claim = self._claim(candidate)
                if claim is None:  # another worker was faster
                    if paced:
                        self.pace.give_back(lane, self.clock())
                    continue
                run.handed += 1
                self._hand_over(claim, lane, paced, run)
        finally:
            run.close()
        return run.handed

    def _next_due(self, lane: str) -> int | None:
        with self.store.session() as session:
            return session.scalar(
                select(Submission.id)
                .where(
                    Submission.lane == lane,
                    Submission.state.in_(WAITING),
                    Submission.next_attempt_at <= self.clock(),
                )
                .order_by(Submission.next_attempt_at, Submission.id)
                .limit(1)
            )

    def _claim(self, submission_id: int) -> _Claim | None:
        """Commit ``sending`` and the hand-off moment before anything is handed over."""
        moment = self.clock()
        with self.store.session() as session:
            result = session.execute(
                update(Submission)
                .where(
                    Submission.id == submission_id,
                    Submission.state.in_(WAITING),
                    Submission.next_attempt_at <= moment,
                )
                .values(state="sending", handoff_at=moment, updated_at=moment)
                .execution_options(synchronize_session=False)
            )
            if not result.rowcount:  # type: ignore[attr-defined]
                return None
            row = session.execute(
                select(Submission, Blob.data)
                .join(Blob, Blob.sha256 == Submission.raw_sha256)
                .where(Submission.id == submission_id)
            ).one()
            submission: Submission = row[0]
            record_submission_change(session, submission.user_id, [submission_id])
            return _Claim(
                id=submission_id,
                user_id=submission.user_id,
                account_id=submission.account_id,
                message_id=submission.message_id,
                raw=row[1],
                envelope=dict(submission.envelope),
                attempts=submission.attempts,
                deferrals=submission.deferrals,
                due=submission.send_at,
                handoff_at=moment,
            )

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

    def _hand_over(self, claim: _Claim, lane: str, paced: bool, run: _Run) -> None:
        """Hand one claimed submission over and commit what came of it (module docstring)."""
        try:
            transport = self._transport(claim.account_id, run)
            mail_from = str(claim.envelope.get("mailFrom", {}).get("email", ""))
            result = transport.send(
                mail_from, claim.recipients, claim.raw, message_id=claim.message_id
            )
        except RefusedError as error:
            code, reply = _reply_of(error, 550)
            self._fail(claim, str(error), code, reply)
        except (AuthError, ConfigError) as error:  # the account needs its owner
            self._fail(claim, str(error))
        except TransientError as error:
            if isinstance(error, RateLimitError):  # the server asked the lane to slow down
                run.stop = True
                self.lane_pause[lane] = float(error.retry_after or SLOW_DOWN.total_seconds())
            if paced:
                self._defer(claim, error)
            else:
                self._count_attempt(claim, error)
        except Exception as error:  # a transport's bug: counted, so it ends in the failed list
            log.exception("Sending submission %s failed unexpectedly", claim.id)
            broken = run.transports.pop(claim.account_id, None)
            if broken is not None:
                _Run({claim.account_id: broken}).close()
            self._count_attempt(claim, error)
        else:
            self._sent(claim, result)

    # -- outcomes ------------------------------------------------------------------

    def _settle(self, session: Session, claim: _Claim, **values: Any) -> bool:
        """Apply an outcome to the hand-off ``claim`` made (not to a later one); whether it did."""
        result = session.execute(
            update(Submission)
            .where(Submission.id == claim.id, Submission.handoff_at == claim.handoff_at)
            .values(updated_at=self.clock(), **values)
            .execution_options(synchronize_session=False)
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            return False
        record_submission_change(session, claim.user_id, [claim.id])
        return True

    def _sent(self, claim: _Claim, result: SendResult) -> None:
        accepted = {key.lower(): reply for key, reply in result.accepted.items()}
        refused = {key.lower(): value for key, value in result.refused.items()}
        status: dict[str, Any] = {}
        for recipient in claim.recipients:
            if recipient.lower() in refused:
                status.update(_status([recipient], refused[recipient.lower()][1], "no"))
            else:
                reply = accepted.get(recipient.lower()) or next(iter(accepted.values()), "250")
                status.update(_status([recipient], reply, "queued"))
        with self.store.session() as session:
            # A hand-off the sweep took for unknown (a very slow server) did deliver after all.
            settled = self._settle(
                session,
                claim,
                state="sent",
                sent_at=self.clock(),
                next_attempt_at=None,
                last_code=250,
                last_error=None,
                delivery_status=status,
            )
            if settled and self.clock() - claim.handoff_at >= HANDOFF_TIMEOUT:
                session.execute(delete(FailedSend).where(FailedSend.submission_id == claim.id))
        if settled:
            self._after_sent(claim.id)

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
    ) -> None:
        with self.store.session() as session:
            self._fail_in(
                session, claim.id, reason, claim=claim, code=code, reply=reply, attempts=attempts
            )

    def _fail_in(
        self,
        session: Session,
        submission_id: int,
        reason: str,
        *,
        claim: _Claim | None = None,
        code: int | None = None,
        reply: str | None = None,
        attempts: int | None = None,
        delivered: str = "no",
    ) -> None:
        """Move one submission to ``failed`` and onto the failed-sends list (in ``session``).

        With ``claim`` only when the submission is still in that hand-off.
        """
        row = session.get(Submission, submission_id)
        if row is None:
            return
        recipients = [str(item["email"]) for item in row.envelope.get("rcptTo", [])]
        values: dict[str, Any] = {
            "state": "failed",
            "next_attempt_at": None,
            "last_code": code,
            "last_error": reason[:2000],
            "delivery_status": _status(recipients, reply or f"{code or 554} {reason}", delivered),
            "attempts": row.attempts if attempts is None else attempts,
        }
        if claim is not None:
            if not self._settle(session, claim, **values):
                return
        else:
            session.execute(
                update(Submission)
                .where(Submission.id == submission_id)
                .values(updated_at=self.clock(), **values)
                .execution_options(synchronize_session=False)
            )
            record_submission_change(session, row.user_id, [submission_id])
        failed = {
            "submission_id": submission_id,
            "lane": row.lane,
            "attempts": values["attempts"],
            "code": code,
            "reason": reason[:2000],
            "failed_at": self.clock(),
        }
        insert_ignoring_conflicts(session, FailedSend, [failed], conflict=["submission_id"])
        log.warning("Submission %s failed: %s", submission_id, reason)

    def _defer(self, claim: _Claim, error: TransientError) -> None:
        """A throttled lane's temporary failure: wait and try again, not an attempt."""
        now = self.clock()
        code, reply = _reply_of(error, 451)
        deadline = claim.due + THROTTLED_WINDOW
        if now >= deadline:
            self._fail(claim, _window_closed(str(error)), code, reply)
            return
        deferrals = claim.deferrals + 1
        retry_after = getattr(error, "retry_after", None)
        pause = timedelta(seconds=float(retry_after)) if retry_after else deferral_pause(deferrals)
        self._put_back(claim, error, code, reply, min(now + pause, deadline), deferrals=deferrals)

    def _count_attempt(self, claim: _Claim, error: BaseException) -> None:
        """An unthrottled lane's failure (or any lane's bug): one attempt of three."""
        now = self.clock()
        code, reply = _reply_of(error, 451)
        attempts = claim.attempts + 1
        if attempts >= MAX_ATTEMPTS:
            reason = f"Gave up after {attempts} attempts (the last: {str(error).rstrip('.')})."
            self._fail(claim, reason, code, reply, attempts=attempts)
            return
        pause = attempt_backoff(attempts)
        retry_after = getattr(error, "retry_after", None)
        if retry_after:
            pause = max(pause, timedelta(seconds=float(retry_after)))
        self._put_back(claim, error, code, reply, now + pause, attempts=attempts)

    def _put_back(
        self,
        claim: _Claim,
        error: BaseException,
        code: int,
        reply: str,
        at: datetime,
        **counted: int,
    ) -> None:
        """Queue the submission again for ``at``, with the failure's reply and the count it adds."""
        with self.store.session() as session:
            self._settle(
                session,
                claim,
                state="queued",
                next_attempt_at=at,
                last_code=code,
                last_error=str(error)[:2000],
                delivery_status=_status(claim.recipients, reply, "queued"),
                **counted,
            )

    # -- sweeps at the start of a run ------------------------------------------------

    def _sweep(self, lane: str, paced: bool) -> None:
        """Steps 1 and 2: fail unknown hand-offs and (throttled lanes) mail past its window."""
        now = self.clock()
        unknown = (Submission.state == "sending") & (Submission.handoff_at <= now - HANDOFF_TIMEOUT)
        late = Submission.state.in_(WAITING) & (Submission.send_at <= now - THROTTLED_WINDOW)
        with self.store.session() as session:
            rows = session.execute(
                select(
                    Submission.id, Submission.state, Submission.handoff_at, Submission.last_error
                )
                .where(Submission.lane == lane, or_(unknown, late) if paced else unknown)
                .order_by(Submission.id)
            ).all()
            for row in rows:
                if row.state != "sending":
                    last = row.last_error or f"the {lane} lane's pace left no room"
                    self._fail_in(session, row.id, _window_closed(last))
                    continue
                reason = (
                    f"The worker stopped while handing this message over at "
                    f"{row.handoff_at:%Y-%m-%d %H:%M} UTC, so the server may have accepted it "
                    "and it is not sent again on its own (ask the recipient, then "
                    f"`mailroom outbound retry {row.id}` if it is missing)."
                )
                self._fail_in(
                    session, row.id, reason, reply="451 4.4.0 hand-off", delivered="unknown"
                )

    # -- for the job and the duty ----------------------------------------------------

    def next_due(self, lane: str) -> datetime | None:
        """When ``lane`` has work next: a waiting submission due, or a hand-off turning unknown."""
        with self.store.session() as session:
            waiting = session.scalar(
                select(func.min(Submission.next_attempt_at)).where(
                    Submission.lane == lane, Submission.state.in_(WAITING)
                )
            )
            handoff = session.scalar(
                select(func.min(Submission.handoff_at)).where(
                    Submission.lane == lane, Submission.state == "sending"
                )
            )
        moments = [waiting, handoff + HANDOFF_TIMEOUT if handoff is not None else None]
        return min((m for m in moments if m is not None), default=None)

    def lanes_with_work(self) -> list[str]:
        """The lanes with something to do now (due, past the window, an unknown hand-off)."""
        now = self.clock()
        return [lane for lane in LANES if (due := self.next_due(lane)) is not None and due <= now]


def _window_closed(last: str) -> str:
    hours = int(THROTTLED_WINDOW.total_seconds() // 3600)
    return f"Not sent within {hours} hours of being due (the last reason: {last.rstrip('.')})."
