"""A faithful Gmail API v1 emulator: real HTTP on 127.0.0.1, scriptable from tests.

Run it by hand with ``python -m tests.emulators.gmail --port 8025``; use it in
tests through the ``gmail_emulator`` fixture (:mod:`tests.emulators.gmail.fixtures`).
"""

from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.quota import DOCUMENTED, NEW_PROJECT, QuotaProfile
from tests.emulators.gmail.service import LoggedRequest

__all__ = ["DOCUMENTED", "NEW_PROJECT", "GmailEmulator", "LoggedRequest", "QuotaProfile"]
