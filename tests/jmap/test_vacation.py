"""VacationResponse/get and /set (RFC 8621 §8) over real HTTP, on both stores."""

from __future__ import annotations

from typing import Any

from tests.jmap.conftest import USING, Jmap

VACATION = "urn:ietf:params:jmap:vacationresponse"
WITH_VACATION = [*USING, VACATION]


def get(client: Jmap, **args: object) -> Any:
    """VacationResponse/get with the vacation capability."""
    return client.call("VacationResponse/get", args, using=WITH_VACATION)


def vacation_set(client: Jmap, **args: object) -> Any:
    """VacationResponse/set with the vacation capability."""
    return client.call("VacationResponse/set", args, using=WITH_VACATION)


def test_the_singleton_exists_disabled_before_anything_is_set(client: Jmap) -> None:
    """A fresh account has a disabled, empty singleton; other ids are notFound."""
    result = get(client, ids=None)
    assert result["list"] == [
        {
            "id": "singleton",
            "isEnabled": False,
            "fromDate": None,
            "toDate": None,
            "subject": None,
            "textBody": None,
            "htmlBody": None,
        }
    ]
    some = get(client, ids=["singleton", "other"], properties=["isEnabled"])
    assert some["list"] == [{"id": "singleton", "isEnabled": False}]
    assert some["notFound"] == ["other"]
    assert VACATION in client.session["accounts"][client.account]["accountCapabilities"]


def test_update_is_stored_and_moves_the_state(client: Jmap) -> None:
    """An update is kept, the state moves, and ifInState with the old state fails."""
    before = get(client)["state"]
    done = vacation_set(
        client,
        ifInState=before,
        update={
            "singleton": {
                "isEnabled": True,
                "fromDate": "2026-07-01T00:00:00Z",
                "toDate": "2026-07-15T00:00:00Z",
                "subject": "Away",
                "textBody": "Back on the 15th.",
                "htmlBody": "<p>Back on the 15th.</p>",
            }
        },
    )
    assert done["updated"] == {"singleton": None}
    assert done["oldState"] == before and done["newState"] != before
    (stored,) = get(client)["list"]
    assert stored["isEnabled"] is True and stored["subject"] == "Away"
    assert stored["fromDate"] == "2026-07-01T00:00:00Z"
    assert stored["htmlBody"] == "<p>Back on the 15th.</p>"
    stale = vacation_set(client, ifInState=before, update={"singleton": {"isEnabled": False}})
    assert stale["error"]["type"] == "stateMismatch"
    off = vacation_set(client, update={"singleton": {"isEnabled": False, "toDate": None}})
    assert off["updated"] == {"singleton": None}
    (after,) = get(client)["list"]
    assert after["isEnabled"] is False and after["toDate"] is None
    assert after["subject"] == "Away"


def test_create_destroy_and_bad_values_are_refused(client: Jmap) -> None:
    """Create and destroy are `singleton` errors; bad values name their properties."""
    result = vacation_set(
        client,
        create={"v": {"isEnabled": True}},
        destroy=["singleton"],
        update={
            "singleton": {"isEnabled": "yes", "fromDate": "2026-07-01T00:00:00+02:00", "x": 1},
            "other": {"isEnabled": True},
        },
    )
    assert result["notCreated"]["v"]["type"] == "singleton"
    assert result["notDestroyed"]["singleton"]["type"] == "singleton"
    refused = result["notUpdated"]["singleton"]
    assert refused["type"] == "invalidProperties"
    assert sorted(refused["properties"]) == ["fromDate", "isEnabled", "x"]
    assert result["notUpdated"]["other"]["type"] == "notFound"
    assert get(client)["list"][0]["isEnabled"] is False


def test_vacation_needs_its_capability(client: Jmap) -> None:
    """Without the vacationresponse capability in `using` the method is unknown."""
    result = client.call("VacationResponse/get", {})
    assert result["error"]["type"] == "unknownMethod"
