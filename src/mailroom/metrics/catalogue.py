"""The process's own metrics, and the one-line functions the engine's hooks call.

All live in prometheus-client's default registry, next to its ``process_*``
(memory, CPU, open files) and ``python_gc_*`` figures. The hooks in jobs,
supervisor, dispatcher, sender and the Gmail pacer call the functions here
rather than touching the metric objects, so their labels are chosen in one
place and never carry user data (see the package docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

# No ``*_created`` series beside every counter and histogram: they double the scrape's
# size and no alert or graph here uses them (``rate()`` copes with restarts without).
disable_created_metrics()  # type: ignore[no-untyped-call]

# Seconds, from "at once" to "an hour late": new mail should land in one or two.
LAG_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
# Arrival dates older than this are old mail moved or appended into a folder, not lag.
LAG_LIMIT = 86400.0
WAIT_BUCKETS = (0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

JOBS = Counter("mailroom_jobs", "Jobs this process ran, by outcome.", ["queue", "task", "outcome"])
JOB_WAIT = Histogram(
    "mailroom_job_wait_seconds",
    "From a job's enqueueing (or its due time) to its start.",
    ["queue"],
    buckets=WAIT_BUCKETS,
)
SYNC_LAG = Histogram(
    "mailroom_sync_lag_seconds",
    "From a new message's arrival at the provider to its storing, for accounts past import.",
    buckets=LAG_BUCKETS,
)
WATCHES = Gauge("mailroom_watches", "IMAP IDLE watches this process holds.")
LEASE_RENEWALS = Counter("mailroom_lease_renewals", "Watch leases renewed.")
LEASE_LOSSES = Counter(
    "mailroom_lease_losses", "Watch leases that could not be renewed (watch torn down)."
)
WATCH_RECONNECTS = Counter(
    "mailroom_watch_reconnects", "Watches that ended and reconnect after their backoff."
)
GMAIL_UNITS = Counter("mailroom_gmail_quota_units", "Gmail API quota units spent.")
GMAIL_REJECTIONS = Counter(
    "mailroom_gmail_quota_rejections", "Gmail quota refusals (each slows its account down)."
)
HANDOFFS = Counter(
    "mailroom_outbound_handoffs",
    "Outgoing messages handed to a server, by lane and outcome.",
    ["lane", "outcome"],
)
JMAP_CALLS = Histogram(
    "mailroom_jmap_call_seconds",
    "JMAP method calls, by method.",
    ["method"],
    buckets=CALL_BUCKETS,
)
HTTP_RESPONSES = Counter(
    "mailroom_http_responses", "HTTP answers, by part (jmap, web) and status.", ["part", "code"]
)


def job_finished(queue: str, task: str, *, failed: bool) -> None:
    """Count one job run to its end (``failed``: it raised)."""
    JOBS.labels(queue, task, "failed" if failed else "done").inc()


def job_started(queue: str, waited: float) -> None:
    """Record how long a job waited before a consumer took it."""
    JOB_WAIT.labels(queue).observe(max(0.0, waited))


def sync_lag(seconds: Iterable[float]) -> None:
    """Record the lag of newly stored mail; arrivals older than a day are not lag."""
    for value in seconds:
        if value < LAG_LIMIT:
            SYNC_LAG.observe(max(0.0, value))


def watches_from(count: Callable[[], int]) -> None:
    """Report this process's watches as ``count()`` at each scrape (the latest supervisor)."""
    WATCHES.set_function(lambda: float(count()))


def lease_renewed(ok: bool) -> None:
    """Count a watch lease renewal, or its loss."""
    (LEASE_RENEWALS if ok else LEASE_LOSSES).inc()


def watch_reconnects() -> None:
    """Count a watch that ended and will connect again after its backoff."""
    WATCH_RECONNECTS.inc()


def gmail_units(units: int) -> None:
    """Count Gmail quota units spent."""
    GMAIL_UNITS.inc(units)


def gmail_rejection() -> None:
    """Count one Gmail quota refusal."""
    GMAIL_REJECTIONS.inc()


def handoff(lane: str, *, sent: bool, failed: bool) -> None:
    """Count one hand-off of a lane: sent, failed for good, or put back (deferred)."""
    outcome = "sent" if sent else "failed" if failed else "deferred"
    HANDOFFS.labels(lane, outcome).inc()


def jmap_call(method: str, seconds: float) -> None:
    """Record one JMAP method call (``method`` must be a registered name or ``unknown``)."""
    JMAP_CALLS.labels(method).observe(seconds)


def http_response(path: str, code: int) -> None:
    """Count one HTTP answer of ``mailroom serve``."""
    part = "jmap" if path.startswith(("/jmap", "/.well-known/jmap")) else "web"
    HTTP_RESPONSES.labels(part, str(code)).inc()
