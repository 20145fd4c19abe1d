"""Signed webhooks: events of a user's mail and accounts POSTed to outside systems.

The flow, one module per step::

    change log (Email, EmailSubmission) ─┐
    account_events (triggers)  ──────────┴─ derive ─▶ webhook_deliveries ─ worker ─▶ POST
                                     per-endpoint cursor     unique (endpoint, event id)

* :mod:`~mailroom.webhooks.events` — the event types, their ids and bodies.
* :mod:`~mailroom.webhooks.signing` — ``Mailroom-Signature: v1=<hex HMAC-SHA256>``.
* :mod:`~mailroom.webhooks.target` — which URLs may be endpoints (https; http only
  for allow-listed private hosts) through the SSRF guard.
* :mod:`~mailroom.webhooks.endpoints` — adding, enabling, removing endpoints; the
  secret shown once and stored sealed.
* :mod:`~mailroom.webhooks.derive` — turning what is recorded durably into deliveries.
* :mod:`~mailroom.webhooks.deliveries` — leases, retries with backoff, dead letters, replay.
* :mod:`~mailroom.webhooks.listing` — the endpoints and dead letters the operator lists
  (plain SQL, for the read commands).
* :mod:`~mailroom.webhooks.worker` — one round: derive, claim, POST, settle.
"""

__all__: list[str] = []
