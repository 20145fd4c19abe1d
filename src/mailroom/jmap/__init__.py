"""The JMAP server (RFC 8620 core, RFC 8621 mail): one account per mailroom user.

Modules, one concept each:

* ``app`` — the HTTP endpoints (session, API, download, upload, push) added
  to the web application by ``jmap_routes``;
* ``auth`` — passwords (scrypt), API tokens, Basic and bearer authentication;
* ``session`` — the Session resource and the advertised capabilities/limits;
* ``dispatcher`` — request validation, result references, running methods;
* ``errors`` — request problems (RFC 7807), method errors, SetErrors;
* ``methods`` — one module per data type;
* ``ids`` — how mailroom keys become JMAP ids (``M123``, ``T45``, ``L7``, ``u1``);
* ``mapping`` — label roles as mailbox roles, state as keywords;
* ``changes`` — states, ``/changes`` on the change log, retention floor, pruning;
* ``emailquery`` — ``Email/query`` filters, sorting, collapsing, paging;
* ``bodies`` — MIME structure as JMAP body parts;
* ``push`` — EventSource ``StateChange`` events.

See ``docs/jmap.md`` for what is supported and how to connect a client.

The package imports nothing itself: a module that needs only ``ids`` or
``identities`` (the CLI's ``send``, the web app) must not pull in the whole
server and its import cycles.
"""
