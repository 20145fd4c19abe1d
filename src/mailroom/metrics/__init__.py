"""Metrics and health: what an operator's Prometheus scrapes, and what a load balancer asks.

Every name below is in the Prometheus text format, from ``prometheus-client``.
No metric carries a user, an account, an address or a subject: labels are only
queue, task, lane, method, status and similar words from a fixed list, so a
scrape can never leak whose mail is where (and the series stay few with
thousands of accounts).

Counters and histograms of the process (:mod:`.catalogue`), in every process
that does the work:

============================================  =========================================
``mailroom_jobs_total{queue,task,outcome}``    jobs run by this process: ``done``/``failed``
``mailroom_job_wait_seconds{queue}``           enqueue (or due time) to start of a job
``mailroom_sync_lag_seconds``                  provider arrival → stored, per new message
                                               of an account past its import
``mailroom_watches``                           IMAP IDLE watches this process holds
``mailroom_lease_renewals_total``              watch leases renewed
``mailroom_lease_losses_total``                watch leases lost (the watch is torn down)
``mailroom_watch_reconnects_total``            watches that ended and reconnect after backoff
``mailroom_gmail_quota_units_total``           Gmail API quota units spent
``mailroom_gmail_quota_rejections_total``      Gmail quota refusals (each slows the account)
``mailroom_outbound_handoffs_total{lane,outcome}``  hand-offs: ``sent``/``deferred``/``failed``
``mailroom_jmap_call_seconds{method}``         JMAP method calls (``unknown`` for others)
``mailroom_http_responses_total{part,code}``   HTTP answers of ``mailroom serve``
                                               (``part``: ``jmap`` or ``web``)
============================================  =========================================

The store's and the queues' view (:mod:`.store_view`), read at scrape time by
``mailroom serve`` only (every process would report the same figures):
``mailroom_queue_depth{queue}``, ``mailroom_queue_oldest_job_age_seconds{queue}``,
``mailroom_queue_scheduled{queue}``, ``mailroom_accounts{status}``,
``mailroom_outbound_submissions{lane,state}`` and ``mailroom_collector_up{part}``.

Processes: ``mailroom serve`` answers ``GET /metrics`` on its HTTP port;
``mailroom worker`` and ``mailroom supervisor`` open their own small endpoint
with ``--metrics-listen HOST:PORT`` (:mod:`.server`). One endpoint per process,
not prometheus-client's multiprocess mode: the processes run on many machines,
which a shared directory of memory-mapped files cannot span, and each process
is scraped (and restarted) on its own; counters restart at zero with their
process, which ``rate()`` expects.

Access (:mod:`.access`): a scrape is answered only from an address in
``MAILROOM_METRICS_ALLOW`` (default loopback) and, when
``MAILROOM_METRICS_TOKEN`` is set, only with ``Authorization: Bearer <token>``.
``/health`` and ``/ready`` are open and say only ok or not ok, with a short
reason (:mod:`.readiness`).
"""
