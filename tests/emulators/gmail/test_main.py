"""``python -m tests.emulators.gmail`` serves a seeded mailbox and prints how to reach it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[3]


def test_runs_by_hand_with_a_seeded_mailbox() -> None:
    """The command prints the URL and a token; the profile counts the seeded messages."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.emulators.gmail", "--port", "0", "--messages", "5"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        url = lines[0].rsplit(" at ", 1)[1].strip()
        token = lines[2].split(":", 1)[1].strip()
        profile = httpx.get(
            f"{url}/gmail/v1/users/me/profile", headers={"Authorization": f"Bearer {token}"}
        ).json()
        assert profile["messagesTotal"] == 5
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
