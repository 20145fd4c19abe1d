"""Fuzz the JMAP request parser: a request document, or a ``Problem``; nothing else.

Contract (``mailroom.jmap.dispatcher``): ``Dispatcher.parse`` returns a JMAP
Request (``using`` a list of known capabilities, at most maxCallsInRequest
``[name, arguments, callId]`` triples) that encodes back to UTF-8 JSON and
is nested no deeper than ``MAX_JSON_DEPTH``, or raises ``Problem``.
"""

from __future__ import annotations

import json
from typing import Any

from fuzz.runner import Check, run


def depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value``."""
    if isinstance(value, dict):
        return 1 + max((depth(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(item) for item in value), default=0)
    return 0


def load() -> Check:
    """Import the parser (instrumented under atheris) and return the check."""
    from mailroom.jmap.dispatcher import MAX_JSON_DEPTH, Dispatcher, Limits
    from mailroom.jmap.errors import Problem
    from mailroom.jmap.methods import METHODS
    from mailroom.jmap.session import CAPABILITIES

    limits = Limits()
    # Parsing reads no store; the dispatcher needs one only to run methods.
    dispatcher = Dispatcher(None, METHODS, CAPABILITIES, limits, lambda _p: "0")  # type: ignore[arg-type]

    def check(data: bytes) -> None:
        try:
            document = dispatcher.parse(data)
        except Problem:
            return
        assert set(document["using"]) <= CAPABILITIES
        calls = document["methodCalls"]
        assert isinstance(calls, list) and len(calls) <= limits.max_calls_in_request
        for call in calls:
            assert isinstance(call, list) and len(call) == 3
            name, arguments, call_id = call
            assert isinstance(name, str) and isinstance(arguments, dict)
            assert isinstance(call_id, str)
        json.dumps(document, ensure_ascii=False).encode("utf-8")
        assert depth(document) <= MAX_JSON_DEPTH

    return check


if __name__ == "__main__":
    run("jmap_request", load, ("mailroom.jmap.dispatcher",))
