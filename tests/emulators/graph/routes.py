"""The Graph v1.0 mail routes: one request in, one reply out, shared by HTTP and $batch.

A route gets an :class:`Call` (mailbox, method, path below ``/v1.0``, query,
lower-cased headers, body) and returns a :class:`Reply` or raises
:class:`~tests.emulators.graph.errors.GraphError`. ``Prefer`` is read per call:
``odata.maxpagesize=N`` sizes delta pages, ``IdType="ImmutableId"`` makes every
id in the reply the immutable one.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any
from urllib.parse import urlencode

from tests.emulators.graph.delta import FOLDERS, DeltaTracker
from tests.emulators.graph.errors import GraphError, bad_request
from tests.emulators.graph.mailbox import FLAG_STATUSES, Mailbox, check_select

DEFAULT_FOLDER_PAGE = 10
PATCHABLE = {"isRead", "flag", "categories"}


@dataclass
class Call:
    """One request to route (an HTTP request or one part of a $batch)."""

    mailbox: Mailbox
    delta: DeltaTracker
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    link_base: str  # absolute URL of /v1.0, for nextLink / deltaLink

    def prefer(self) -> dict[str, str]:
        """The ``Prefer`` preferences, lower-cased names, unquoted values."""
        found: dict[str, str] = {}
        for part in self.headers.get("prefer", "").split(","):
            name, _, value = part.strip().partition("=")
            if name:
                found[name.strip().lower()] = value.strip().strip('"')
        return found

    @property
    def immutable(self) -> bool:
        """Whether this call asked for immutable ids."""
        return self.prefer().get("idtype", "").lower() == "immutableid"

    def page_size(self) -> int | None:
        """``Prefer: odata.maxpagesize``, if given and a positive number."""
        value = self.prefer().get("odata.maxpagesize", "")
        return int(value) if value.isdigit() and int(value) > 0 else None

    def json(self) -> dict[str, Any]:
        """The body as a JSON object; 400 if it is not one."""
        try:
            value = json.loads(self.body or b"{}")
        except ValueError:
            raise bad_request("The request body is not valid JSON.") from None
        if not isinstance(value, dict):
            raise bad_request("The request body must be a JSON object.")
        return value

    def select(self) -> tuple[str, ...]:
        """The ``$select`` names, checked."""
        names = tuple(p.strip() for p in self.query.get("$select", "").split(",") if p.strip())
        check_select(names)
        return names


@dataclass
class Reply:
    """A route's answer: status, body (JSON-able, bytes or None) and headers."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Call, list[str]], Reply]
ROUTES: list[tuple[str, re.Pattern[str], Handler]] = []
SEGMENT = r"([^/]+)"


def route(method: str, pattern: str) -> Callable[[Handler], Handler]:
    """Register a handler for a method and a path pattern (``{}`` is one segment)."""

    def register(handler: Handler) -> Handler:
        literal = SEGMENT.join(re.escape(part) for part in pattern.split("{}"))
        regex = re.compile(f"^{literal}$", re.IGNORECASE)
        ROUTES.append((method, regex, handler))
        return handler

    return register


def dispatch(call: Call) -> Reply:
    """Route a call; 404 for an unknown path, 405 for a known path and another method."""
    known = False
    for method, regex, handler in ROUTES:
        match = regex.match(call.path)
        if match:
            known = True
            if method == call.method:
                return handler(call, list(match.groups()))
    if known:
        raise GraphError(405, "Request_BadRequest", "The method is not allowed for this resource.")
    raise GraphError(400, "BadRequest", f"Resource not found for the segment '{call.path}'.")


# -- folders -------------------------------------------------------------------


def _number(call: Call, name: str, default: int) -> int:
    """A non-negative integer query option; 400 if it is something else."""
    value = call.query.get(name, "")
    if not value:
        return default
    if not value.isdigit():
        raise bad_request(f"The query option {name} must be a whole number.", "BadRequest")
    return int(value)


def _folder_page(call: Call, folders: list[Any], path: str) -> Reply:
    top = _number(call, "$top", DEFAULT_FOLDER_PAGE) or DEFAULT_FOLDER_PAGE
    skip = _number(call, "$skip", 0)
    chunk = folders[skip : skip + top]
    body: dict[str, Any] = {
        "@odata.context": f"{call.link_base}/$metadata#users('me')/mailFolders",
        "value": [call.mailbox.render_folder(f) for f in chunk],
    }
    if skip + top < len(folders):
        query = {k: v for k, v in call.query.items() if k != "$skip"}
        query.update({"$top": str(top), "$skip": str(skip + top)})
        body["@odata.nextLink"] = f"{call.link_base}{path}?{urlencode(query)}"
    return Reply(200, body)


def _hidden(call: Call) -> bool:
    return call.query.get("includeHiddenFolders", "").lower() == "true"


@route("GET", "/me/mailFolders")
def list_folders(call: Call, _: list[str]) -> Reply:
    """Top-level folders (not hidden ones unless includeHiddenFolders=true), paged."""
    folders = call.mailbox.children(call.mailbox.root, _hidden(call))
    return _folder_page(call, folders, "/me/mailFolders")


@route("GET", "/me/mailFolders/{}/childFolders")
def list_children(call: Call, args: list[str]) -> Reply:
    """A folder's direct children, paged."""
    parent = call.mailbox.folder(args[0])
    folders = call.mailbox.children(parent, _hidden(call))
    return _folder_page(call, folders, f"/me/mailFolders/{args[0]}/childFolders")


@route("GET", "/me/mailFolders/delta")
def folder_delta(call: Call, _: list[str]) -> Reply:
    """One page of the folder tree's delta round (registered before the folder by id)."""
    body = call.delta.page(FOLDERS, call.query, call.page_size(), False, call.link_base)
    return Reply(200, body)


@route("GET", "/me/mailFolders/{}")
def get_folder(call: Call, args: list[str]) -> Reply:
    """One folder by id or well-known name."""
    return Reply(200, call.mailbox.render_folder(call.mailbox.folder(args[0])))


def _create(call: Call, parent: str | None) -> Reply:
    body = call.json()
    name = body.get("displayName")
    if not isinstance(name, str):
        raise bad_request("displayName is required.", "ErrorInvalidRequest")
    folder = call.mailbox.create_folder(name, parent, bool(body.get("isHidden", False)))
    return Reply(201, call.mailbox.render_folder(folder))


@route("POST", "/me/mailFolders")
def create_folder(call: Call, _: list[str]) -> Reply:
    """A new top-level folder."""
    return _create(call, None)


@route("POST", "/me/mailFolders/{}/childFolders")
def create_child(call: Call, args: list[str]) -> Reply:
    """A new folder under another."""
    return _create(call, args[0])


@route("PATCH", "/me/mailFolders/{}")
def rename_folder(call: Call, args: list[str]) -> Reply:
    """Rename a folder (``displayName``)."""
    name = call.json().get("displayName")
    if not isinstance(name, str) or not name.strip():
        raise bad_request("displayName must be a non-empty string.", "ErrorInvalidRequest")
    return Reply(200, call.mailbox.render_folder(call.mailbox.rename_folder(args[0], name)))


@route("POST", "/me/mailFolders/{}/move")
def move_folder(call: Call, args: list[str]) -> Reply:
    """Move a user folder under ``destinationId`` (id or well-known name): 201 and the folder."""
    destination = call.json().get("destinationId")
    if not isinstance(destination, str) or not destination:
        raise bad_request("destinationId is required.", "ErrorInvalidRequest")
    return Reply(201, call.mailbox.render_folder(call.mailbox.move_folder(args[0], destination)))


@route("DELETE", "/me/mailFolders/{}")
def delete_folder(call: Call, args: list[str]) -> Reply:
    """Delete a user folder, its subfolders and their messages."""
    call.mailbox.delete_folder(args[0])
    return Reply(204)


# -- messages ------------------------------------------------------------------


@route("GET", "/me/mailFolders/{}/messages/delta")
def message_delta(call: Call, args: list[str]) -> Reply:
    """One page of the folder's delta round."""
    folder = call.mailbox.folder(args[0])
    body = call.delta.page(folder.id, call.query, call.page_size(), call.immutable, call.link_base)
    headers = {}
    if call.page_size():
        headers["Preference-Applied"] = f"odata.maxpagesize={call.page_size()}"
    return Reply(200, body, headers)


@route("GET", "/me/mailFolders/{}/messages")
def list_messages(call: Call, args: list[str]) -> Reply:
    """A folder's messages, newest received first, ``$top`` / ``$skip`` paged."""
    mailbox = call.mailbox
    folder = mailbox.folder(args[0])
    select = call.select()
    with mailbox.lock:
        inside = [m for m in mailbox.messages.values() if m.folder_id == folder.id]
    inside.sort(key=lambda m: (m.props["receivedDateTime"], m.created), reverse=True)
    top = _number(call, "$top", 10) or 10
    skip = _number(call, "$skip", 0)
    body: dict[str, Any] = {
        "value": [mailbox.render_message(m, select, call.immutable) for m in inside[skip:][:top]]
    }
    if skip + top < len(inside):
        query = dict(call.query, **{"$top": str(top), "$skip": str(skip + top)})
        body["@odata.nextLink"] = (
            f"{call.link_base}/me/mailFolders/{args[0]}/messages?{urlencode(query)}"
        )
    return Reply(200, body)


@route("GET", "/me/messages/{}")
def get_message(call: Call, args: list[str]) -> Reply:
    """One message, every property or the ``$select`` ones."""
    message = call.mailbox.message(args[0])
    return Reply(200, call.mailbox.render_message(message, call.select(), call.immutable))


@route("GET", "/me/messages/{}/$value")
def get_mime(call: Call, args: list[str]) -> Reply:
    """The raw RFC 822 message."""
    message = call.mailbox.message(args[0])
    return Reply(200, message.raw, {"Content-Type": "text/plain"})


@route("PATCH", "/me/messages/{}")
def patch_message(call: Call, args: list[str]) -> Reply:
    """Change isRead, flag and categories (other properties are refused here)."""
    body = call.json()
    unknown = set(body) - PATCHABLE
    if unknown:
        raise bad_request(
            f"The emulator updates only {sorted(PATCHABLE)}, not {sorted(unknown)}.",
            "ErrorInvalidPropertyUpdate",
        )
    is_read = body.get("isRead")
    if is_read is not None and not isinstance(is_read, bool):
        raise bad_request("isRead must be true or false.", "ErrorInvalidArgument")
    flag = body.get("flag")
    status = None
    if flag is not None:
        status = flag.get("flagStatus") if isinstance(flag, dict) else None
        if status not in FLAG_STATUSES:
            raise bad_request("flag.flagStatus is not a flag status.", "ErrorInvalidArgument")
    categories = body.get("categories")
    if categories is not None and (
        not isinstance(categories, list) or not all(isinstance(c, str) for c in categories)
    ):
        raise bad_request("categories must be a list of strings.", "ErrorInvalidArgument")
    message = call.mailbox.update(
        args[0], is_read=is_read, flag_status=status, categories=categories
    )
    return Reply(200, call.mailbox.render_message(message, (), call.immutable))


@route("POST", "/me/messages/{}/move")
def move_message(call: Call, args: list[str]) -> Reply:
    """Move to ``destinationId`` (id or well-known name): 201 and the moved message."""
    destination = call.json().get("destinationId")
    if not isinstance(destination, str) or not destination:
        raise bad_request("destinationId is required.", "ErrorInvalidRequest")
    message = call.mailbox.move(args[0], destination)
    return Reply(201, call.mailbox.render_message(message, (), call.immutable))


@route("DELETE", "/me/messages/{}")
def delete_message(call: Call, args: list[str]) -> Reply:
    """Delete: the message goes to Deleted Items (and is gone if it was there)."""
    call.mailbox.delete(args[0])
    return Reply(204)


@route("POST", "/me/messages/{}/permanentDelete")
def permanent_delete(call: Call, args: list[str]) -> Reply:
    """Delete for good."""
    call.mailbox.delete(args[0], permanent=True)
    return Reply(204)


# -- sending ---------------------------------------------------------------------


def _addresses(recipients: Any) -> str:
    if not isinstance(recipients, list):
        return ""
    parts = []
    for item in recipients:
        address = (item or {}).get("emailAddress", {}) if isinstance(item, dict) else {}
        if isinstance(address, dict) and address.get("address"):
            name = address.get("name")
            parts.append(f'"{name}" <{address["address"]}>' if name else address["address"])
    return ", ".join(parts)


def _mime_from_json(mailbox: Mailbox, message: dict[str, Any]) -> bytes:
    built = EmailMessage()
    built["From"] = mailbox.address
    for header, key in (("To", "toRecipients"), ("Cc", "ccRecipients"), ("Reply-To", "replyTo")):
        value = _addresses(message.get(key))
        if value:
            built[header] = value
    built["Subject"] = str(message.get("subject", ""))
    built["Date"] = formatdate(localtime=False)
    built["Message-ID"] = make_msgid(domain=mailbox.address.partition("@")[2] or "localhost")
    for header in message.get("internetMessageHeaders") or []:
        if isinstance(header, dict) and header.get("name") and header.get("value"):
            built[str(header["name"])] = str(header["value"])
    body = message.get("body") or {}
    content = str(body.get("content", "")) if isinstance(body, dict) else ""
    kind = str(body.get("contentType", "text")).lower() if isinstance(body, dict) else "text"
    built.set_content(content, subtype="html" if kind == "html" else "plain")
    return built.as_bytes()


@route("POST", "/me/sendMail")
def send_mail(call: Call, _: list[str]) -> Reply:
    """Send a JSON message or base64 MIME (``Content-Type: text/plain``): 202."""
    kind = call.headers.get("content-type", "").split(";")[0].strip().lower()
    save = True
    if kind == "text/plain":
        try:
            raw = base64.b64decode(call.body.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise bad_request(
                "The MIME content is not a valid base64 string.",
                "ErrorMimeContentInvalidBase64String",
            ) from None
        if not raw.strip():
            raise bad_request("The MIME content is empty.", "ErrorMimeContentInvalid")
    else:
        body = call.json()
        message = body.get("message")
        if not isinstance(message, dict):
            raise bad_request("message is required.", "ErrorInvalidRequest")
        if not any(message.get(k) for k in ("toRecipients", "ccRecipients", "bccRecipients")):
            raise bad_request("At least one recipient is required.", "ErrorInvalidRecipients")
        raw = _mime_from_json(call.mailbox, message)
        save = body.get("saveToSentItems", True) is not False
    with call.mailbox.lock:
        call.mailbox.sent.append(raw)
        if save:
            call.mailbox.add(raw, "sentitems", is_read=True)
    return Reply(202)
