"""Running one JMAP API request: validation, result references, method calls (RFC 8620 §3).

A request is checked as a whole first — JSON, shape, known capabilities,
the call limit — and answered with an RFC 7807 problem if any check fails
(no method runs).

The body must be I-JSON (RFC 8620 §3.1, RFC 7493), or it is ``notJSON``:
UTF-8, no ``NaN``/``Infinity`` or numbers beyond a double, no duplicate
member names, no unpaired surrogates, and nested at most
:data:`MAX_JSON_DEPTH` deep. The depth is measured on the bytes before
decoding (RFC 8259 §9 lets a parser limit nesting), because Python's
decoder recurses and a body of 100,000 ``[`` would exhaust its stack.

Then each call runs in order, in its own database
transaction (a later call sees an earlier call's writes, and a failed call
undoes only itself):

1. ``#name`` arguments are result references: resolved against the
   responses so far with a JSON Pointer whose ``*`` token maps over an
   array and flattens (§3.7). Giving both ``name`` and ``#name`` is
   ``invalidArguments``; a reference that does not resolve is
   ``invalidResultReference``. Then, in the ``ids`` of every ``/get``, a
   ``#creationId`` of an object created earlier in the request (or given in
   ``createdIds``) becomes that object's id (§5.3); an unknown one stays as
   it is, so the method answers it in ``notFound``.
2. The method must exist and its capability must be in ``using``;
   otherwise ``unknownMethod``.
3. The method's :class:`~mailroom.jmap.errors.MethodError` becomes an
   ``error`` response; a :class:`~mailroom.errors.MailroomError` (such as
   sealed mail that does not open) is ``serverFail`` with its sentence; any
   other exception is logged and answered as ``serverFail``. The other
   calls still run.
4. A method may add responses of its own after its response, under the
   same call id (``Context.follow_ups``): ``EmailSubmission/set``'s implicit
   ``Email/set`` (RFC 8621 §7.5).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from mailroom.errors import MailroomError
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
from mailroom.metrics import catalogue
from mailroom.store.engine import Store

log = logging.getLogger(__name__)

Handler = Callable[["Context", Session, dict[str, Any]], dict[str, Any]]

# Nesting of the request JSON. A request, its calls and arguments take four
# levels and a filter two per level (``filter`` allows 20), so 128 is ample
# for any real client and far below what the recursive decoder and encoder
# survive.
MAX_JSON_DEPTH = 128
# Tokens of a result-reference path; the pointer walk recurses once per token.
MAX_POINTER_TOKENS = 64
# RFC 8620 §1.3: Int and UnsignedInt are at most 2^53-1 in magnitude.
MAX_INT = 2**53 - 1

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_OPEN = frozenset(b"[{")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits the session advertises and the server enforces."""

    max_size_request: int = 10_000_000
    max_concurrent_requests: int = 8
    max_calls_in_request: int = 64
    max_objects_in_get: int = 1000
    max_objects_in_set: int = 1000
    max_query_limit: int = 1000
    max_size_upload: int = 50_000_000  # octets of one upload (and of an imported email)
    max_concurrent_upload: int = 4  # uploads of one user in progress at once


@dataclass
class Context:
    """What a method call knows: the store, who asks, with which capabilities."""

    store: Store
    principal: Principal
    using: frozenset[str]
    limits: Limits
    created_ids: dict[str, str] = field(default_factory=dict)
    # Responses (name, arguments) the running call adds after its own, same call id.
    follow_ups: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

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
    if not path.startswith("/") or path.count("/") > MAX_POINTER_TOKENS:
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
        shown = path if len(path) <= 80 else path[:77] + "..."
        raise ValueError(
            f"the path {shown!r} does not resolve (at most {MAX_POINTER_TOKENS} tokens)"
        ) from None


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


def _created_ids_resolved(name: str, args: dict[str, Any], created: dict[str, str]) -> None:
    """Replace each known ``#creationId`` in the ``ids`` of a /get call by the id it made."""
    wanted = args.get("ids")
    if not name.endswith("/get") or not isinstance(wanted, list):
        return
    args["ids"] = [
        created.get(value[1:], value) if isinstance(value, str) and value.startswith("#") else value
        for value in wanted
    ]


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


class _NotIJson(ValueError):
    """The body is JSON but not I-JSON (the message says why)."""


def _max_depth(brackets: bytes, limit: int) -> int:
    depth = deepest = 0
    for byte in brackets:
        if byte in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        else:
            depth -= 1
    return deepest


def nesting_exceeds(body: bytes, limit: int) -> bool:
    """Whether the JSON text nests arrays/objects deeper than ``limit`` (cheap, no decoding).

    Most requests have fewer brackets than the limit and cost two counts.
    Otherwise strings are cut out (a ``[`` inside one does not nest) and only
    brackets kept, all in C; dropping the empty pairs ``[]`` then ``{}`` lowers
    the depth by at most two, so only a count near the limit needs the full text.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    reduced = _max_depth(brackets.replace(b"[]", b"").replace(b"{}", b""), limit)
    if reduced > limit:
        return True
    if reduced <= limit - 2:
        return False
    return _max_depth(brackets, limit) > limit


def _no_constant(name: str) -> Any:
    raise _NotIJson(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotIJson(f"the number {text[:40]} is beyond the range of a double")
    return value


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _NotIJson(f"the member name {name[:40]!r} occurs twice in one object")
            seen.add(name)
    return result


def decode_ijson(body: bytes) -> Any:
    """Decode an I-JSON body; ``notJSON`` :class:`Problem` saying why if it is not."""
    if nesting_exceeds(body, MAX_JSON_DEPTH):
        raise Problem(NOT_JSON, 400, f"The request is nested deeper than {MAX_JSON_DEPTH} levels.")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Problem(NOT_JSON, 400, "The request body is not UTF-8.") from None
    try:
        document = json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite,
            object_pairs_hook=_unique_names,
        )
    except _NotIJson as exc:
        raise Problem(NOT_JSON, 400, f"The request is not I-JSON: {exc}.") from None
    except (ValueError, RecursionError) as exc:
        raise Problem(NOT_JSON, 400, f"The request body is not JSON ({exc}).") from None
    if _SURROGATE_ESCAPE.search(body):
        # A lone \uD800 decodes to a str that cannot be encoded again (I-JSON
        # forbids it); only bodies with such escapes pay for this check.
        try:
            json.dumps(document, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise Problem(
                NOT_JSON, 400, "The request is not I-JSON: it has an unpaired surrogate."
            ) from None
    return document


def check_media_type(value: str | None) -> None:
    """RFC 8620 §3.1: an API request is ``application/json`` (charset UTF-8 if given)."""
    media, _, params = (value or "").partition(";")
    charset = "utf-8"
    for param in params.split(";"):
        name, _, given = param.partition("=")
        if name.strip().lower() == "charset":
            charset = given.strip().strip('"').lower()
    if media.strip().lower() != "application/json" or charset not in ("utf-8", "utf8"):
        shown = (value or "none")[:80]
        raise Problem(
            NOT_JSON,
            400,
            f"The Content-Type of a JMAP request must be application/json (UTF-8), not {shown}.",
        )


def request_too_large(limit: int) -> Problem:
    """The ``maxSizeRequest`` limit problem."""
    return Problem(
        LIMIT,
        400,
        f"The request is larger than maxSizeRequest ({limit} octets).",
        limit="maxSizeRequest",
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
            raise request_too_large(self.limits.max_size_request)
        document = decode_ijson(body)
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
            context.follow_ups.clear()
            started = time.perf_counter()
            try:
                args = _resolve(raw_args, responses)
                _created_ids_resolved(name, args, context.created_ids)
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
                responses.extend((more, extra, call_id) for more, extra in context.follow_ups)
            except MethodError as exc:
                responses.append(("error", exc.arguments(), call_id))
            except MailroomError as exc:  # e.g. sealed mail that does not open: its sentence
                log.warning("JMAP method %s failed: %s", name, exc)
                failed = {"type": "serverFail", "description": str(exc)}
                responses.append(("error", failed, call_id))
            except Exception:
                log.exception("JMAP method %s failed", name)
                responses.append(
                    ("error", {"type": "serverFail", "description": "An internal error."}, call_id)
                )
            # Only registered names: a client's made-up ones must not grow the label set.
            shown = name if name in self.methods else "unknown"
            catalogue.jmap_call(shown, time.perf_counter() - started)
        response: dict[str, Any] = {
            "methodResponses": [list(r) for r in responses],
            "sessionState": self.session_state(principal),
        }
        if "createdIds" in document:
            response["createdIds"] = context.created_ids
        return response
