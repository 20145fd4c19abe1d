"""Running one JMAP API request: validation, result references, method calls (RFC 8620 §3).

A request is checked as a whole first — JSON, shape, known capabilities,
the call limit — and answered with an RFC 7807 problem if any check fails
(no method runs). Then each call runs in order, in its own database
transaction (a later call sees an earlier call's writes, and a failed call
undoes only itself):

1. ``#name`` arguments are result references: resolved against the
   responses so far with a JSON Pointer whose ``*`` token maps over an
   array and flattens (§3.7). Giving both ``name`` and ``#name`` is
   ``invalidArguments``; a reference that does not resolve is
   ``invalidResultReference``.
2. The method must exist and its capability must be in ``using``;
   otherwise ``unknownMethod``.
3. The method's :class:`~mailroom.jmap.errors.MethodError` becomes an
   ``error`` response; any other exception is logged and answered as
   ``serverFail``. The other calls still run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.auth import Principal
from mailroom.jmap.errors import (
    LIMIT,
    NOT_JSON,
    NOT_REQUEST,
    UNKNOWN_CAPABILITY,
    MethodError,
    Problem,
    invalid_arguments,
)
from mailroom.store.engine import Store

log = logging.getLogger(__name__)

Handler = Callable[["Context", Session, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits the session advertises and the server enforces."""

    max_size_request: int = 10_000_000
    max_concurrent_requests: int = 8
    max_calls_in_request: int = 64
    max_objects_in_get: int = 1000
    max_objects_in_set: int = 1000
    max_query_limit: int = 1000


@dataclass
class Context:
    """What a method call knows: the store, who asks, with which capabilities."""

    store: Store
    principal: Principal
    using: frozenset[str]
    limits: Limits
    created_ids: dict[str, str] = field(default_factory=dict)

    @property
    def account_id(self) -> str:
        """The caller's one JMAP account."""
        return ids.account_id(self.principal.user_id)

    def check_account(self, args: dict[str, Any]) -> int:
        """The user id of the call's ``accountId``; ``accountNotFound`` for any other account."""
        value = args.get("accountId")
        if not isinstance(value, str):
            raise invalid_arguments("accountId is required and must be a string.")
        if ids.parse_account(value) != self.principal.user_id:
            raise MethodError("accountNotFound", f"There is no account {value!r} for this user.")
        return self.principal.user_id


@dataclass(frozen=True, slots=True)
class Method:
    """A registered method: its capability, its handler and the arguments it takes.

    An argument not in ``arguments`` is ``invalidArguments`` (None: any), so a
    client's misspelled argument fails loudly instead of being ignored.
    """

    capability: str
    handler: Handler
    arguments: frozenset[str] | None = None


class _BadPointer(Exception):
    pass


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _BadPointer
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _walk(value: Any, tokens: list[str]) -> Any:
    if not tokens:
        return value
    token, rest = tokens[0], tokens[1:]
    if isinstance(value, list):
        if token == "*":
            out: list[Any] = []
            for item in value:
                found = _walk(item, rest)
                if isinstance(found, list):
                    out.extend(found)
                else:
                    out.append(found)
            return out
        if token.isdigit() and (token == "0" or not token.startswith("0")):
            index = int(token)
            if index < len(value):
                return _walk(value[index], rest)
        raise _BadPointer
    if isinstance(value, dict) and token in value:
        return _walk(value[token], rest)
    raise _BadPointer


def evaluate_pointer(document: Any, path: str) -> Any:
    """Evaluate an RFC 8620 JSON Pointer (with ``*``); ValueError if it does not resolve."""
    try:
        return _walk(document, _tokens(path))
    except _BadPointer:
        raise ValueError(f"the path {path!r} does not resolve") from None


def _resolve(
    args: dict[str, Any], responses: list[tuple[str, dict[str, Any], str]]
) -> dict[str, Any]:
    resolved: dict[str, Any] = {}
    for key, value in args.items():
        if not key.startswith("#"):
            resolved.setdefault(key, value)
            continue
        name = key[1:]
        if name in args:
            raise invalid_arguments(f"Both {name!r} and {key!r} are given.")
        if not isinstance(value, dict) or not all(
            isinstance(value.get(part), str) for part in ("resultOf", "name", "path")
        ):
            raise MethodError(
                "invalidResultReference", f"{key} must have resultOf, name and path strings."
            )
        source = next((r for r in responses if r[2] == value["resultOf"]), None)
        if source is None:
            raise MethodError(
                "invalidResultReference", f"No earlier call has the id {value['resultOf']!r}."
            )
        if source[0] != value["name"]:
            raise MethodError(
                "invalidResultReference",
                f"The call {value['resultOf']!r} answered {source[0]!r}, not {value['name']!r}.",
            )
        try:
            resolved[name] = evaluate_pointer(source[1], value["path"])
        except ValueError as exc:
            raise MethodError("invalidResultReference", f"{key}: {exc}.") from None
    return resolved


def _is_request(document: Any) -> bool:
    if not isinstance(document, dict):
        return False
    using, calls = document.get("using"), document.get("methodCalls")
    if not isinstance(using, list) or not all(isinstance(u, str) for u in using):
        return False
    if not isinstance(calls, list):
        return False
    for call in calls:
        if not (
            isinstance(call, list)
            and len(call) == 3
            and isinstance(call[0], str)
            and isinstance(call[1], dict)
            and isinstance(call[2], str)
        ):
            return False
    created = document.get("createdIds")
    return created is None or (
        isinstance(created, dict) and all(isinstance(v, str) for v in created.values())
    )


class Dispatcher:
    """Parses and runs API requests against the registered methods."""

    def __init__(
        self,
        store: Store,
        methods: dict[str, Method],
        capabilities: frozenset[str],
        limits: Limits,
        session_state: Callable[[Principal], str],
    ) -> None:
        self.store = store
        self.methods = methods
        self.capabilities = capabilities
        self.limits = limits
        self.session_state = session_state

    def parse(self, body: bytes) -> dict[str, Any]:
        """The request document, or a :class:`Problem`."""
        if len(body) > self.limits.max_size_request:
            raise Problem(
                LIMIT,
                400,
                f"The request is larger than maxSizeRequest ({self.limits.max_size_request}).",
                limit="maxSizeRequest",
            )
        try:
            document = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise Problem(NOT_JSON, 400, "The request body is not UTF-8 JSON.") from None
        if not _is_request(document):
            raise Problem(
                NOT_REQUEST,
                400,
                "The request is not a JMAP Request object "
                "(using: [String], methodCalls: [[name, arguments, callId]]).",
            )
        unknown = sorted(set(document["using"]) - self.capabilities)
        if unknown:
            raise Problem(
                UNKNOWN_CAPABILITY,
                400,
                f"This server does not support the capability {unknown[0]!r}.",
            )
        if len(document["methodCalls"]) > self.limits.max_calls_in_request:
            raise Problem(
                LIMIT,
                400,
                f"The request has more than maxCallsInRequest "
                f"({self.limits.max_calls_in_request}) method calls.",
                limit="maxCallsInRequest",
            )
        return dict(document)

    def run(self, principal: Principal, document: dict[str, Any]) -> dict[str, Any]:
        """Run every method call of a parsed request; the Response object."""
        context = Context(
            self.store,
            principal,
            frozenset(document["using"]),
            self.limits,
            dict(document.get("createdIds") or {}),
        )
        responses: list[tuple[str, dict[str, Any], str]] = []
        for name, raw_args, call_id in document["methodCalls"]:
            try:
                args = _resolve(raw_args, responses)
                method = self.methods.get(name)
                if method is None or method.capability not in context.using:
                    raise MethodError("unknownMethod", f"There is no method {name!r} here.")
                if method.arguments is not None:
                    unknown = sorted(set(args) - method.arguments)
                    if unknown:
                        raise invalid_arguments(f"{name} has no argument {unknown[0]!r}.")
                with self.store.session() as session:
                    result = method.handler(context, session, args)
                responses.append((name, result, call_id))
            except MethodError as exc:
                responses.append(("error", exc.arguments(), call_id))
            except Exception:
                log.exception("JMAP method %s failed", name)
                responses.append(
                    ("error", {"type": "serverFail", "description": "An internal error."}, call_id)
                )
        response: dict[str, Any] = {
            "methodResponses": [list(r) for r in responses],
            "sessionState": self.session_state(principal),
        }
        if "createdIds" in document:
            response["createdIds"] = context.created_ids
        return response
