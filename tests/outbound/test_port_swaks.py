"""Debian's ``swaks`` (a stock SMTP client) sends through the submission port with STARTTLS."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailroom.store.engine import Store
from tests.conftest import service_missing
from tests.outbound.port_support import PortSetup, port_setup, submissions


@pytest.fixture
def setup(store: Store, tmp_path: Path) -> Iterator[PortSetup]:
    """The started port over me and eve."""
    yield from port_setup(store, tmp_path)


def _swaks(setup: PortSetup, *args: str) -> subprocess.CompletedProcess[str]:
    swaks = shutil.which("swaks")
    if swaks is None:
        service_missing("swaks", "apt-get install swaks; scripts/test-services.sh does it")
    host, number = setup.port.address
    command = [
        str(swaks),
        "--server",
        f"{host}:{number}",
        "--tls",
        "--tls-verify",
        "--tls-ca-path",
        str(setup.cert[0]),
        "--tls-sni",
        "localhost",
        "--auth-user",
        "me",
        "--auth-password",
        "pw",
        "--to",
        "bob@example.net",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mechanism", ["PLAIN", "LOGIN"])
def test_swaks_delivers_into_the_queue(store: Store, setup: PortSetup, mechanism: str) -> None:
    """swaks --tls --auth PLAIN|LOGIN: exit 0, the 250 names the submission it queued."""
    done = _swaks(
        setup,
        "--auth",
        mechanism,
        "--from",
        "me@example.org",
        "--header",
        "Subject: from swaks",
        "--header",
        "X-Mailroom-Kind: invoice",
        "--body",
        "Sent by swaks.",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ((row, raw),) = submissions(store)
    assert f"Queued as submission {row.id}." in done.stdout
    assert (row.lane, row.kind) == ("urgent", "invoice")
    assert b"Subject: from swaks" in raw and b"Sent by swaks." in raw
    assert b"X-Mailroom-Kind" not in raw


def test_swaks_sending_as_someone_else_is_told_why(store: Store, setup: PortSetup) -> None:
    """swaks --from eve's address: it stops at MAIL FROM with the port's sentence."""
    done = _swaks(setup, "--auth", "PLAIN", "--from", "eve@example.org")
    assert done.returncode != 0
    assert "550 5.7.1 eve@example.org is not one of your addresses" in done.stdout
    assert submissions(store) == []
