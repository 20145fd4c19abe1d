"""The emulator runs by hand: ``python -m tests.emulators.graph --port N``."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_python_m_serves_on_the_given_port_with_a_printed_token() -> None:
    """The module prints the Graph root and a token that works against it."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.emulators.graph", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = {}
        for line in process.stdout:
            name, _, value = line.partition(":")
            lines[name.strip()] = value.strip()
            if name.startswith("Ctrl-C"):
                break
        assert lines["Graph root"] == f"http://127.0.0.1:{port}/v1.0"
        response = httpx.get(
            f"{lines['Graph root']}/me/mailFolders/inbox",
            headers={"Authorization": f"Bearer {lines['Access token']}"},
        )
        assert response.status_code == 200 and response.json()["displayName"] == "Inbox"
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
