"""Events in mail: schema.org tickets, bookings and parcels → stored events → a calendar feed.

* :mod:`mailroom.events.structured` — JSON-LD and microdata items of raw HTML;
* :mod:`mailroom.events.schema` — items → events (kinds, times, zones);
* :mod:`mailroom.events.extract` — the enricher and the backfill (stored, idempotent);
* :mod:`mailroom.events.feed` — a user's events as iCalendar (RFC 5545);
* :mod:`mailroom.events.feed_tokens` — the feed's secret address;
* :mod:`mailroom.events.stored` — the stored events of some messages, in one query;
* :mod:`mailroom.events.email_events` — the JMAP ``events`` property of an Email.

The job runtime registers :func:`mailroom.events.extract.extract_events` in
:data:`mailroom.jobs.tasks.ENRICHERS`: the ingest step ``follow_up`` enqueues
each committed batch's new mail on its follow-up queue (live mail first, a
backlog last) and the follow-up job extracts there, never inside ingest.
Submodules are imported where used (this package imports nothing).
"""
