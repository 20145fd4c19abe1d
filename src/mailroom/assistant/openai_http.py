"""An OpenAI-compatible chat/completions endpoint as the assistant's model.

Works with any server that speaks ``POST /v1/chat/completions`` — a local
llama.cpp (``llama-server``) or ollama, or a hosted service. The request goes
through the SSRF guard (:mod:`mailroom.providers.guarded_http`): a server on
loopback or the LAN must be in the operator's ``MAILROOM_ALLOWED_PRIVATE_HOSTS``.
The key travels as a bearer token, so plain http is allowed only to loopback
or to a host the operator allow-listed.

The model is asked for one JSON object ``{"tab": ..., "confidence": ...,
"reason": ...}``; a bare tab name is accepted too. Anything else — a timeout,
an HTTP error, a refused host, text that names no tab — is no verdict, logged
once per occurrence as one sentence, never raised.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import httpx

from mailroom.assistant.base import MailFacts, Verdict
from mailroom.categories.tabs import CATEGORIES
from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.providers.base import ProviderError
from mailroom.providers.guarded_http import guarded_client, require_https

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You sort e-mail into inbox tabs. The tabs are: primary (mail from a person to the "
    "reader, or anything that needs their attention), promotions (marketing, offers, "
    "newsletters from companies), social (notifications from social networks), updates "
    "(receipts, orders, shipping, bills, account and security notices), forums (mailing "
    "lists, discussion groups). Answer with one JSON object and nothing else: "
    '{"tab": "<one tab>", "confidence": <0 to 1>, "reason": "<a few words>"}.'
)
_HEADERS_SHOWN = ("list-id", "list-unsubscribe", "precedence", "auto-submitted", "x-mailer")
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def _endpoint(url: str) -> str:
    base = url.rstrip("/")
    return base if base.endswith("/chat/completions") else base + "/chat/completions"


def _check_url(url: str, allowed: list[str]) -> None:
    host = httpx.URL(url).host
    if host in allowed:
        return  # the operator named this (LAN) model server
    require_https(url, "The assistant URL")


def prompt_for(mail: MailFacts) -> str:
    """The user message: the stored facts of one mail, bounded."""
    lines = [
        f"From: {mail.from_name} <{mail.from_email}>",
        f"Subject: {mail.subject}",
    ]
    for name in _HEADERS_SHOWN:
        if name in mail.headers:
            lines.append(f"{name}: {mail.headers[name][:200]}")
    lines += ["", mail.text]
    return "\n".join(lines)


def parse_answer(content: str) -> Verdict | None:
    """A verdict from the model's text, or None when it names no tab."""
    text = content.strip()
    if text.lower().strip(" .\"'") in CATEGORIES:
        return Verdict(text.lower().strip(" .\"'"), 0.5, "the model named the tab")
    match = _OBJECT.search(text)
    if match is None:
        return None
    try:
        data = json.loads(match.group(0))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    tab = str(data.get("tab", "")).strip().lower()
    if tab not in CATEGORIES:
        return None
    try:
        confidence = min(max(float(data.get("confidence", 0.5)), 0.0), 1.0)
    except (TypeError, ValueError):
        confidence = 0.5
    return Verdict(tab, confidence, str(data.get("reason", ""))[:300])


class OpenAICompatible:
    """The assistant's model behind an OpenAI-compatible chat/completions URL."""

    name = "openai"

    def __init__(
        self,
        url: str,
        model: str,
        key: str | None = None,
        timeout: float = 30.0,
        allowed_hosts: list[str] | None = None,
    ) -> None:
        allowed = list(allowed_hosts or [])
        _check_url(url, allowed)
        self.url = _endpoint(url)
        self.model = model
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = guarded_client(allowed, timeout=timeout, headers=headers)

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatible:
        """The adapter the operator configured (``MAILROOM_ASSISTANT_*``)."""
        key = settings.assistant_key.get_secret_value() if settings.assistant_key else None
        return cls(
            settings.assistant_url,
            settings.assistant_model,
            key,
            settings.assistant_timeout,
            settings.allowed_private_host_list,
        )

    def request_body(self, mail: MailFacts) -> dict[str, Any]:
        """The chat/completions request for one message."""
        return {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": prompt_for(mail)},
            ],
        }

    def classify(self, mail: MailFacts) -> Verdict | None:
        """Ask the endpoint once; None (logged) for no answer in time or a bad answer."""
        try:
            response = self._client.post(self.url, json=self.request_body(mail))
        except httpx.TimeoutException:
            log.warning(
                "The assistant model gave no answer in time for message %s.", mail.message_id
            )
            return None
        except (httpx.HTTPError, ProviderError, ConfigError) as exc:
            log.warning(
                "The assistant model could not be reached for message %s: %s", mail.message_id, exc
            )
            return None
        if response.status_code != 200:
            log.warning(
                "The assistant model answered HTTP %s for message %s.",
                response.status_code,
                mail.message_id,
            )
            return None
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            log.warning(
                "The assistant model's answer for message %s was not a chat completion.",
                mail.message_id,
            )
            return None
        verdict = parse_answer(str(content))
        if verdict is None:
            log.warning(
                "The assistant model's answer for message %s named no tab.", mail.message_id
            )
        return verdict

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
