"""Run the Gmail IMAP emulator by hand: ``python -m tests.emulators.gmail_imap``.

Options: ``--port`` (default 1143), ``--user``, ``--password``, ``--demo N``
(deliver N sample messages with a few labels first). Stop it with Ctrl-C.
"""

from __future__ import annotations

import argparse
import time

from tests.emulators.gmail_imap.model import GmailModel
from tests.emulators.gmail_imap.server import GmailImapServer

DEMO_LABELS = (("\\Inbox",), ("\\Inbox", "Work"), ("Work/Invoices",), ("\\Inbox", "\\Starred"))


def demo_message(number: int) -> bytes:
    """A small sample message."""
    return (
        f"From: Sender {number} <sender{number}@example.com>\r\n"
        "To: me@gmail.com\r\n"
        f"Subject: Demo message {number}\r\n"
        f"Message-ID: <demo-{number}@example.com>\r\n"
        "Date: Tue, 01 Dec 2026 10:00:00 +0000\r\n"
        "\r\n"
        f"Hello {number}.\r\n"
    ).encode()


def main() -> None:
    """Parse the options, fill the mailbox, serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=1143)
    parser.add_argument("--user", default="me@gmail.com")
    parser.add_argument("--password", default="app-password")
    parser.add_argument("--demo", type=int, default=0, help="sample messages to deliver first")
    options = parser.parse_args()
    model = GmailModel()
    for number in range(options.demo):
        model.add(demo_message(number), DEMO_LABELS[number % len(DEMO_LABELS)])
    server = GmailImapServer(options.user, options.password, model=model, port=options.port)
    server.start()
    print(f"Gmail IMAP emulator on 127.0.0.1:{server.port} (user {options.user})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
