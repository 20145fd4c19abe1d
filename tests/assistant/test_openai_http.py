"""The OpenAI-compatible adapter over real HTTP: the request, good and bad answers, the guard."""

from __future__ import annotations

import logging

import pytest

from mailroom.assistant.base import MailFacts, Verdict
from mailroom.assistant.openai_http import OpenAICompatible, parse_answer
from mailroom.errors import ConfigError
from tests.assistant.fake_model import fake_model, verdict


def _mail(subject: str) -> MailFacts:
    return MailFacts(1, 1, "Shop", "news@shop.example", subject, "Hello", {"list-id": "<l>"})


def test_a_verdict_and_every_kind_of_bad_answer(caplog: pytest.LogCaptureFixture) -> None:
    """A JSON answer is a verdict; prose, an unknown tab and a timeout are
    no verdict, each logged in one sentence; the request names the model and carries the key."""
    rules = {
        "good": (0.0, "Sure! " + verdict("updates", "a receipt") + " Hope that helps."),
        "prose": (0.0, "This looks like marketing to me."),
        "unknown": (0.0, verdict("spam")),
        "slow": (3.0, verdict("updates")),
    }
    with fake_model(rules) as model:
        adapter = OpenAICompatible(
            model.url, "tiny", key="sk-test", timeout=1.0, allowed_hosts=["127.0.0.1"]
        )
        try:
            with caplog.at_level(logging.WARNING, "mailroom.assistant"):
                assert adapter.classify(_mail("good")) == Verdict("updates", 0.9, "a receipt")
                assert adapter.classify(_mail("prose")) is None
                assert adapter.classify(_mail("unknown")) is None
                assert adapter.classify(_mail("slow")) is None
        finally:
            adapter.close()
        body = model.requests[0]
    assert body["model"] == "tiny" and body["temperature"] == 0
    assert "Subject: good" in body["messages"][1]["content"]
    assert "list-id: <l>" in body["messages"][1]["content"]
    said = [record.getMessage() for record in caplog.records]
    assert said == [
        "The assistant model's answer for message 1 named no tab.",
        "The assistant model's answer for message 1 named no tab.",
        "The assistant model gave no answer in time for message 1.",
    ]


def test_the_ssrf_guard_and_plain_http() -> None:
    """A loopback model not on the operator's allow-list is refused by the guard (no verdict);
    plain http to a host that is neither loopback nor allow-listed is refused up front."""
    with fake_model({"x": (0.0, verdict("primary"))}) as model:
        adapter = OpenAICompatible(model.url, "tiny", timeout=2.0)
        try:
            assert adapter.classify(_mail("x")) is None
        finally:
            adapter.close()
        assert model.requests == []
    with pytest.raises(ConfigError, match="must use https"):
        OpenAICompatible("http://models.example.net/v1", "tiny")
    lan = OpenAICompatible("http://10.1.2.3:11434/v1", "tiny", allowed_hosts=["10.1.2.3"])
    assert lan.url == "http://10.1.2.3:11434/v1/chat/completions"
    lan.close()


def test_parse_answer_accepts_a_bare_tab_and_clamps_confidence() -> None:
    """A bare tab name is a verdict; a confidence outside 0–1 is clamped."""
    assert parse_answer(" Promotions. ") == Verdict("promotions", 0.5, "the model named the tab")
    assert parse_answer('{"tab": "forums", "confidence": 7}') == Verdict("forums", 1.0, "")
    assert parse_answer("[1, 2]") is None
