"""A Gmail-like IMAP server for tests and demos: X-GM-EXT-1 over real IMAP on 127.0.0.1.

``model``     the Gmail mailbox (messages once, with labels) and the folders it shows
``protocol``  reading IMAP commands, writing IMAP values
``server``    the IMAP server (``GmailImapServer``)

Run by hand: ``python -m tests.emulators.gmail_imap --port 1143`` (see ``__main__``).
"""

from tests.emulators.gmail_imap.model import GmailMessage, GmailModel
from tests.emulators.gmail_imap.server import GmailImapServer

__all__ = ["GmailImapServer", "GmailMessage", "GmailModel"]
