"""`mailroom webhooks ...`: the secret shown once, SSRF refusals, dead list, replay and ping."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import select, text

from mailroom.cli.main import cli
from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.store.engine import Store
from mailroom.store.models import WebhookDelivery, WebhookEndpoint
from mailroom.webhooks import signing
from mailroom.webhooks.deliveries import MAX_ATTEMPTS
from mailroom.webhooks.target import check_url
from mailroom.webhooks.worker import WebhookWorker
from tests.webhooks.support import Clock, Receiver, drive, hook_settings, live_account, new_mail


def invoke(store: Store, settings: Settings, *args: str, allowed: str = "127.0.0.1") -> Result:
    """Run the CLI in-process on the test store with the test's master key."""
    url = store.engine.url.render_as_string(hide_password=False)
    assert settings.master_key is not None
    return CliRunner().invoke(
        cli,
        ["--data-dir", str(store.data_dir), "--database-url", url, *args],
        env={
            "MAILROOM_ALLOWED_PRIVATE_HOSTS": allowed,
            "MAILROOM_MASTER_KEY": settings.master_key.get_secret_value(),
        },
        catch_exceptions=False,
    )


def _add(store: Store, settings: Settings, url: str, *more: str) -> tuple[int, str]:
    done = invoke(store, settings, "webhooks", "add", url, *more)
    assert done.exit_code == 0, done.output
    endpoint = re.search(r"endpoint (\d+)", done.output)
    secret = re.search(r"(whsec_\S+)", done.output)
    assert endpoint and secret
    return int(endpoint.group(1)), secret.group(1)


def test_add_prints_the_secret_once_and_stores_it_sealed(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """The secret is in add's output, never in list's, and not in the database in plain text."""
    settings = hook_settings(tmp_path)
    live_account(store)
    endpoint_id, secret = _add(store, settings, receiver.url, "--events", "messageNew")
    listed = invoke(store, settings, "webhooks", "list")
    assert receiver.url in listed.output and "messageNew" in listed.output
    assert secret not in listed.output
    [entry] = invoke(store, settings, "webhooks", "list", "--json").output.splitlines()
    assert json.loads(entry)["id"] == endpoint_id and "secret" not in json.loads(entry)
    with store.engine.connect() as conn:
        sealed = conn.execute(text("SELECT secret FROM webhook_endpoints")).scalar()
    assert sealed is not None and secret.encode() not in bytes(sealed)
    assert secret[6:].encode() not in bytes(sealed)


def test_ping_reaches_the_receiver_signed(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """`test ID` POSTs a ping at once that verifies with the secret add printed."""
    settings = hook_settings(tmp_path)
    live_account(store)
    endpoint_id, secret = _add(store, settings, receiver.url)
    done = invoke(store, settings, "webhooks", "test", str(endpoint_id))
    assert done.exit_code == 0 and "accepted the ping (HTTP 200)" in done.output
    [request] = receiver.requests
    event = json.loads(request.body)
    assert event["type"] == "ping"
    h = request.headers
    assert signing.verify(
        secret,
        h["Mailroom-Webhook-Id"],
        h["Mailroom-Webhook-Timestamp"],
        request.body,
        h["Mailroom-Signature"],
        now=float(h["Mailroom-Webhook-Timestamp"]),
    )
    receiver.default = 500
    failed = invoke(store, settings, "webhooks", "test", str(endpoint_id))
    assert failed.exit_code == 1 and "HTTP 500" in failed.output


def test_dead_list_and_replay_all(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """Dead deliveries are listed per owner; replay --all-dead sends them again."""
    settings = hook_settings(tmp_path)
    account = live_account(store)
    _add(store, settings, receiver.url)
    new_mail(store, account, 2)
    receiver.default = 500
    clock = Clock()
    worker = WebhookWorker(store, settings, clock=clock)
    drive(worker, clock, rounds=MAX_ATTEMPTS, step=timedelta(hours=7))
    dead = invoke(store, settings, "webhooks", "dead", "--owner", "me", "--json")
    entries = [json.loads(line) for line in dead.output.splitlines()]
    assert len(entries) == 2 and {e["type"] for e in entries} == {"messageNew"}
    assert "HTTP 500" in invoke(store, settings, "webhooks", "dead").output
    receiver.default = 200
    replayed = invoke(store, settings, "webhooks", "replay", "--all-dead")
    assert "2 dead webhook deliveries are queued again" in replayed.output
    clock.now = clock.now.replace(year=clock.now.year + 1)  # replay is due at the real now
    worker.run_once()
    worker.close()
    assert sorted(receiver.accepted_ids()) == sorted(e["eventId"] for e in entries)
    assert "No dead webhook deliveries." in invoke(store, settings, "webhooks", "dead").output


def test_plain_errors(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """A bad URL, an unknown id, an unknown event type: one sentence, exit status 1."""
    settings = hook_settings(tmp_path)
    live_account(store)
    cases = [
        (("add", "ftp://example.org/x"), "must be an https URL"),
        (("add", receiver.url, "--events", "messageLost"), "no webhook event called"),
        (("remove", "99"), "no webhook endpoint with id 99"),
        (("replay", "99"), "no webhook delivery with id 99"),
        (("replay",), "Give either a DELIVERY_ID or --all-dead"),
        (("test", "99"), "no webhook endpoint with id 99"),
    ]
    for args, sentence in cases:
        done = invoke(store, settings, "webhooks", *args)
        assert done.exit_code == 1, args
        assert sentence in done.output and "Traceback" not in done.output


def test_a_private_address_not_allow_listed_is_refused(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """The SSRF guard refuses loopback and private hosts unless the operator allow-listed them."""
    settings = hook_settings(tmp_path)
    live_account(store)
    refused = invoke(store, settings, "webhooks", "add", receiver.url, allowed="")
    assert refused.exit_code == 1 and "cannot be used from here" in refused.output
    for url in ("https://10.0.0.7/hook", "https://169.254.169.254/latest", "http://[::1]:8/x"):
        with pytest.raises(ConfigError, match="cannot be used from here"):
            check_url(url, ())
    with pytest.raises(ConfigError, match="must use https"):
        check_url("http://93.184.215.14/hook", ())
    with store.session() as session:
        assert session.scalars(select(WebhookEndpoint)).all() == []


def test_delivery_is_guarded_too(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """An endpoint added while allowed is not POSTed to once the allow-list drops its host."""
    settings = hook_settings(tmp_path)
    account = live_account(store)
    _add(store, settings, receiver.url)
    new_mail(store, account, 1)
    strict = Settings(data_dir=tmp_path, master_key=settings.master_key, allowed_private_hosts="")
    worker = WebhookWorker(store, strict, clock=Clock())
    worker.run_once()
    worker.close()
    assert receiver.requests == []
    with store.session() as session:
        delivery = session.scalars(select(WebhookDelivery)).one()
    assert delivery.state == "pending" and delivery.attempts == 1
    assert delivery.last_error is not None and "cannot be used from here" in delivery.last_error


def test_gone_endpoint_enable_and_remove(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """After a 410 the list says disabled; enable brings it back; remove takes its deliveries."""
    settings = hook_settings(tmp_path)
    account = live_account(store)
    endpoint_id, _ = _add(store, settings, receiver.url)
    new_mail(store, account, 1)
    receiver.default = 410
    worker = WebhookWorker(store, settings, clock=Clock())
    worker.run_once()
    worker.close()
    assert (
        "disabled: The endpoint answered 410 Gone"
        in invoke(store, settings, "webhooks", "list").output
    )
    refused = invoke(store, settings, "webhooks", "test", str(endpoint_id))
    assert refused.exit_code == 1 and "is disabled" in refused.output
    assert invoke(store, settings, "webhooks", "enable", str(endpoint_id)).exit_code == 0
    assert "active)" in invoke(store, settings, "webhooks", "list").output
    assert invoke(store, settings, "webhooks", "remove", str(endpoint_id)).exit_code == 0
    assert "No webhook endpoints." in invoke(store, settings, "webhooks", "list").output
    with store.session() as session:
        assert session.scalars(select(WebhookDelivery)).all() == []
