"""Serve a seeded emulated mailbox by hand: ``python -m tests.emulators.gmail --port 8025``."""

from __future__ import annotations

import argparse
import signal
import threading

from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.quota import PROFILES
from tests.emulators.gmail.seed import seed_mailbox


def main() -> None:
    """Start the emulator, seed it, print its URL and a token, serve until interrupted."""
    parser = argparse.ArgumentParser(description="A Gmail API v1 emulator on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--messages", type=int, default=20, help="messages to seed")
    parser.add_argument("--address", default="owner@example.com")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="documented")
    parser.add_argument("--quota", type=int, default=None, help="units per minute per user")
    args = parser.parse_args()
    gmail = GmailEmulator(args.address, profile=PROFILES[args.profile])
    if args.quota is not None:
        gmail.set_quota_limit(args.quota)
    seed_mailbox(gmail, args.messages)
    gmail.start(args.port)
    access, refresh = gmail.tokens()
    print(f"Gmail emulator for {gmail.address} at {gmail.url}", flush=True)
    print(f"  API:          {gmail.url}/gmail/v1/users/me/profile")
    print(f"  access token: {access}")
    print(f"  refresh token: {refresh}")
    print(f"  client id:    {gmail.oauth.client_id}")
    print(f"  client secret: {gmail.oauth.client_secret}", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        gmail.stop()


if __name__ == "__main__":
    main()
