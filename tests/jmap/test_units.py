"""Small pure parts: JSON Pointer with `*`, id parsing, push arguments."""

from __future__ import annotations

import pytest

from mailroom.jmap import ids
from mailroom.jmap.dispatcher import evaluate_pointer
from mailroom.jmap.errors import Problem
from mailroom.jmap.push import parse_request

DOC = {
    "ids": ["M1", "M2"],
    "list": [{"id": "T1", "emailIds": ["M1", "M2"]}, {"id": "T2", "emailIds": ["M3"]}],
    "a/b": {"~x": 1},
}


def test_pointer_maps_flattens_indexes_and_unescapes() -> None:
    """`*` maps and flattens, numbers index arrays, ~1 and ~0 unescape, "" is the whole."""
    assert evaluate_pointer(DOC, "/ids") == ["M1", "M2"]
    assert evaluate_pointer(DOC, "/list/*/id") == ["T1", "T2"]
    assert evaluate_pointer(DOC, "/list/*/emailIds") == ["M1", "M2", "M3"]
    assert evaluate_pointer(DOC, "/list/1/emailIds/0") == "M3"
    assert evaluate_pointer(DOC, "/a~1b/~0x") == 1
    assert evaluate_pointer(DOC, "") == DOC


@pytest.mark.parametrize(
    "path", ["ids", "/nope", "/ids/2", "/ids/01", "/ids/-", "/list/*/nope", "/a~1b/*"]
)
def test_pointer_failures(path: str) -> None:
    """Paths that do not resolve raise ValueError (invalidResultReference upstream)."""
    with pytest.raises(ValueError):
        evaluate_pointer(DOC, path)


def test_ids_round_trip_and_reject_junk() -> None:
    """Every id kind parses back; malformed ids name nothing."""
    assert ids.parse_email(ids.email_id(42)) == 42
    assert ids.parse_mailbox(ids.mailbox_id(7)) == 7
    assert ids.parse_account(ids.account_id(3)) == 3
    assert ids.parse_thread(ids.thread_id(5, 9)) == ("T", 5)
    assert ids.parse_thread(ids.thread_id(None, 9)) == ("TM", 9)
    assert ids.parse_blob(ids.raw_blob_id(8)) == (8, None)
    assert ids.parse_blob(ids.part_blob_id(8, "2.1")) == (8, "2.1")
    for junk in ("", "M", "M0", "M01", "Mx", "m1", "L-1", 5, None, "M" + "9" * 30):
        assert ids.parse_email(junk) is None and ids.parse_mailbox(junk) is None
    assert ids.parse_blob("A8-") is None and ids.parse_blob("A8-0") is None


def test_push_arguments() -> None:
    """types narrows to known types, ping is clamped, bad values are 400 problems."""
    request = parse_request("Email,Nope", "state", "99999", "12")
    assert request.types == ("Email",) and request.close_after_state
    assert request.ping == 3600 and request.last_event_id == 12
    assert parse_request("*", "no", "0", None).types == (
        "Email",
        "Mailbox",
        "Thread",
        "EmailDelivery",
        "Identity",
        "VacationResponse",
        "EmailSubmission",
    )
    assert parse_request(None, None, None, "junk").last_event_id is None
    for bad in (("*", "later", "0"), ("*", "no", "x"), ("*", "no", "-5")):
        with pytest.raises(Problem):
            parse_request(*bad, None)
