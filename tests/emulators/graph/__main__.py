"""Run the Graph emulator by hand: ``python -m tests.emulators.graph --port 8025``.

It prints the Graph root and a ready access token, optionally delivers the
``.eml`` files of a directory into the Inbox, and serves until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
from pathlib import Path

from tests.emulators.graph.server import DEFAULT_ADDRESS, GraphEmulator


def main(argv: list[str] | None = None) -> int:
    """Parse the options, start the emulator, wait for Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m tests.emulators.graph")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--address", default=DEFAULT_ADDRESS, help="the mailbox's address")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added per request")
    parser.add_argument("--load", type=Path, help="a directory of .eml files for the Inbox")
    options = parser.parse_args(argv)
    emulator = GraphEmulator(port=options.port, address=options.address)
    emulator.set_latency(options.latency)
    if options.load:
        for path in sorted(options.load.glob("*.eml")):
            emulator.add_message(path.read_bytes())
    with emulator:
        tokens = emulator.issue_tokens()
        print(f"Graph root:    {emulator.graph_url}")
        print(f"Token URL:     {emulator.token_url()}")
        print(f"Access token:  {tokens['access_token']}")
        print(f"Refresh token: {tokens['refresh_token']}")
        print("Ctrl-C stops.", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
