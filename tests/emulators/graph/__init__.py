"""A faithful local emulator of Microsoft Graph v1.0 mail, on real HTTP (127.0.0.1).

Start one with ``GraphEmulator()`` as a context manager, the ``graph_emulator``
fixture (:mod:`.fixture`), or by hand: ``python -m tests.emulators.graph --port N``.
The REST shapes follow ``../shared/reference/API-CONTRACTS.md`` §2 and Microsoft's
reference; each module's docstring states the behaviour it emulates:

* :mod:`.oauth` — the v2.0 authorize and token endpoints (PKCE, refresh rotation);
* :mod:`.mailbox` — folders, messages, REST vs immutable ids, change bookkeeping;
* :mod:`.delta` — per-folder message delta, its tokens and scripted imperfections;
* :mod:`.routes` — the mail routes; :mod:`.batch` — JSON ``$batch``;
* :mod:`.server` — HTTP, throttling, the 4-requests-per-mailbox limit, the log.
"""

from tests.emulators.graph.server import DEFAULT_ADDRESS, GraphEmulator, LoggedRequest

__all__ = ["DEFAULT_ADDRESS", "GraphEmulator", "LoggedRequest"]
