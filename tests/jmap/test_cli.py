"""`mailroom user add`, `token create` and `serve --tls-*` as a user meets them."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
from click.testing import CliRunner, Result

from mailroom.cli.main import cli
from tests.jmap.conftest import free_port, self_signed


def run(*args: str, data_dir: Path, stdin: str | None = None) -> Result:
    """Run the CLI in process (quick) with its own data dir."""
    return CliRunner().invoke(
        cli, list(args), input=stdin, env={"MAILROOM_DATA_DIR": str(data_dir)}
    )


def _one_sentence(result: Result) -> str:
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("mailroom: ")
    assert len(result.stderr.strip().splitlines()) == 1
    return result.stderr


def test_user_add_sets_passwords_and_token_create_prints_a_token(tmp_path: Path) -> None:
    """user add creates or updates users from a file or stdin; token create prints a token."""
    data = tmp_path / "data"
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    created = run("user", "add", "alice", "--password-file", str(secret), data_dir=data)
    assert created.exit_code == 0 and created.stdout.strip() == "User alice created."
    again = run("user", "add", "alice", "--password-stdin", data_dir=data, stdin="other\n")
    assert again.exit_code == 0 and again.stdout.strip() == "Password of alice set."
    token = run("token", "create", "alice", "--name", "phone", data_dir=data)
    assert token.exit_code == 0 and token.stdout.strip().startswith("mrt_")
    assert len(token.stdout.strip()) > 40


def test_user_and_token_errors_are_one_sentence(tmp_path: Path) -> None:
    """Missing or doubled password sources, empty passwords and unknown users fail plainly."""
    data = tmp_path / "data"
    empty = tmp_path / "empty"
    empty.write_text("\n")
    cases = [
        (("user", "add", "bob"), "exactly one"),
        (("user", "add", "bob", "--password-file", str(empty), "--password-stdin"), "exactly one"),
        (("user", "add", "bob", "--password-file", str(tmp_path / "nope")), "does not exist"),
        (("user", "add", "bob", "--password-file", str(empty)), "empty"),
        (("user", "add", "a:b", "--password-file", str(empty)), "colon"),
        (("token", "create", "nobody"), "no user called"),
    ]
    for args, words in cases:
        assert words in _one_sentence(run(*args, data_dir=data)), args


def test_serve_refuses_half_or_broken_tls(tmp_path: Path) -> None:
    """A certificate without key, a missing file or a non-PEM file is one plain sentence."""
    cert, key = self_signed(tmp_path)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    data = tmp_path / "data"
    assert "both" in _one_sentence(run("serve", "--tls-cert", str(cert), data_dir=data))
    missing = run(
        "serve", "--tls-cert", str(tmp_path / "x.pem"), "--tls-key", str(key), data_dir=data
    )
    assert "does not exist" in _one_sentence(missing)
    broken = run("serve", "--tls-cert", str(junk), "--tls-key", str(key), data_dir=data)
    assert "cannot be used" in _one_sentence(broken)


def test_serve_speaks_https_with_the_given_certificate(tmp_path: Path) -> None:
    """`mailroom serve --tls-cert --tls-key` serves JMAP over https with https URLs."""
    cert, key = self_signed(tmp_path)
    data = tmp_path / "data"
    secret = tmp_path / "pw"
    secret.write_text("pw\n")
    assert run("user", "add", "me", "--password-file", str(secret), data_dir=data).exit_code == 0
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mailroom",
            "serve",
            "--port",
            str(port),
            "--tls-cert",
            str(cert),
            "--tls-key",
            str(key),
        ],
        env={**os.environ, "MAILROOM_DATA_DIR": str(data)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        trust = ssl.create_default_context(cafile=str(cert))
        answer = httpx.get(
            f"https://127.0.0.1:{port}/.well-known/jmap", auth=("me", "pw"), verify=trust
        )
        assert answer.status_code == 200
        assert answer.json()["apiUrl"] == f"https://127.0.0.1:{port}/jmap/api"
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=30)
    assert "https://" in out and "Traceback" not in err
