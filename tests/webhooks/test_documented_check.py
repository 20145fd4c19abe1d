"""The signature check printed in docs/operations.md verifies what mailroom sends."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mailroom.store.engine import Store
from mailroom.webhooks.worker import WebhookWorker
from tests.conftest import ROOT
from tests.webhooks.support import (
    Receiver,
    hooked,
)


def documented_check() -> Callable[[str, dict[str, str], bytes], bool]:
    """``verify_webhook`` as the Webhooks section of docs/operations.md writes it."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text.split("## Webhooks", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "docs/operations.md has no Python example under Webhooks"
    assert len(match.group(1).strip().splitlines()) <= 12
    scope: dict[str, Any] = {}
    exec(compile(match.group(1), "docs/operations.md", "exec"), scope)  # noqa: S102
    check = scope["verify_webhook"]
    assert callable(check)
    return check  # type: ignore[no-any-return]


def test_the_documented_check_accepts_a_real_delivery_and_refuses_a_tampered_one(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """A POST the worker sent passes the documented check; a changed body or secret does not."""
    verify_webhook = documented_check()
    hook = hooked(store, tmp_path, receiver.url, mail=1)
    settings = hook.settings
    secret = hook.secret
    worker = WebhookWorker(store, settings)  # the real clock: the check compares with time()
    worker.run_once()
    worker.close()
    [request] = receiver.requests
    assert verify_webhook(secret, request.headers, request.body)
    assert not verify_webhook(secret, request.headers, request.body + b" ")
    assert not verify_webhook(secret + "x", request.headers, request.body)
    old = {**request.headers, "Mailroom-Webhook-Timestamp": "1000000000"}
    assert not verify_webhook(secret, old, request.body)
