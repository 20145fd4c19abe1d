"""JSON batching: ``POST /v1.0/$batch`` with up to 20 requests.

Each part is ``{"id", "method", "url", "headers"?, "body"?, "dependsOn"?}`` with a
URL relative to ``/v1.0``. Parts run in the order given (Graph forwards at most
four at a time to Exchange, so order is all a client may rely on with
``dependsOn``); a part whose dependency did not succeed answers ``424
FailedDependency``. The batch itself answers 200 with ``{"responses": [{"id",
"status", "headers", "body"}]}`` — a part can be a 429 inside a 200 batch. A
batch of more than 20, duplicate ids or a ``dependsOn`` naming no earlier part is
refused whole with 400. A non-JSON part body (MIME) is base64 in the response.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.emulators.graph.errors import GraphError, bad_request
from tests.emulators.graph.routes import Call, Reply, dispatch

MAX_PARTS = 20
PartRunner = Callable[[Call], Reply]


def _check(requests: Any) -> list[dict[str, Any]]:
    if not isinstance(requests, list) or not requests:
        raise bad_request("The batch must hold a non-empty 'requests' array.", "BadRequest")
    if len(requests) > MAX_PARTS:
        raise bad_request(
            f"The batch holds {len(requests)} requests; the limit is {MAX_PARTS}.", "BadRequest"
        )
    seen: set[str] = set()
    for part in requests:
        if not isinstance(part, dict) or not all(k in part for k in ("id", "method", "url")):
            raise bad_request("Every batch request needs id, method and url.", "BadRequest")
        for dependency in part.get("dependsOn") or []:
            if str(dependency) not in seen:
                raise bad_request(
                    f"Request {part['id']} depends on {dependency}, which is not an earlier "
                    "request of the batch.",
                    "BadRequest",
                )
        if str(part["id"]) in seen:
            raise bad_request(f"The request id {part['id']} is used twice.", "BadRequest")
        seen.add(str(part["id"]))
    return requests


def _part_call(outer: Call, part: dict[str, Any]) -> Call:
    url = urlsplit(str(part["url"]))
    path = url.path if url.path.startswith("/") else "/" + url.path
    if path.lower().startswith("/v1.0/"):
        path = path[len("/v1.0") :]
    headers = {str(k).lower(): str(v) for k, v in (part.get("headers") or {}).items()}
    body = part.get("body")
    if body is None:
        raw = b""
    elif isinstance(body, str):
        raw = body.encode()
    else:
        raw = json.dumps(body).encode()
        headers.setdefault("content-type", "application/json")
    return Call(
        outer.mailbox,
        outer.delta,
        str(part["method"]).upper(),
        path,
        dict(parse_qsl(url.query, keep_blank_values=True)),
        headers,
        raw,
        outer.link_base,
    )


def _rendered(part_id: str, reply: Reply) -> dict[str, Any]:
    headers = dict(reply.headers)
    body = reply.body
    if isinstance(body, bytes):
        body = base64.b64encode(body).decode()
    elif body is not None:
        headers.setdefault("Content-Type", "application/json")
    shown: dict[str, Any] = {"id": part_id, "status": reply.status, "headers": headers}
    if body is not None:
        shown["body"] = body
    return shown


def error_reply(error: GraphError) -> Reply:
    """A GraphError as a reply (status, error body, its headers)."""
    return Reply(error.status, error.body(), dict(error.headers))


def run_batch(outer: Call, run_part: PartRunner = dispatch) -> Reply:
    """Run a batch; ``run_part`` answers one part (the server adds throttling and its log)."""
    parts = _check(outer.json().get("requests"))
    statuses: dict[str, int] = {}
    responses = []
    for part in parts:
        part_id = str(part["id"])
        failed = [d for d in part.get("dependsOn") or [] if not 200 <= statuses[str(d)] < 300]
        if failed:
            reply = error_reply(
                GraphError(424, "FailedDependency", "A request this one depends on failed.")
            )
        else:
            try:
                reply = run_part(_part_call(outer, part))
            except GraphError as error:
                reply = error_reply(error)
        statuses[part_id] = reply.status
        responses.append(_rendered(part_id, reply))
    return Reply(200, {"responses": responses})
