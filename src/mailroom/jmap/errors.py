"""JMAP errors at their three levels (RFC 8620 §3.6).

* :class:`Problem` — the whole request failed (not JSON, not a request,
  unknown capability, over a limit, bad credentials): an RFC 7807 problem
  document with an HTTP status, no method ran.
* :class:`MethodError` — one method call failed: answered as
  ``["error", {"type": ..., "description": ...}, callId]`` while the other
  calls of the request still run.
* :func:`set_error` — one object of a ``/set`` failed: a SetError value in
  ``notCreated`` / ``notUpdated`` / ``notDestroyed``, never raised.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

ERROR_URN = "urn:ietf:params:jmap:error:"
UNKNOWN_CAPABILITY = ERROR_URN + "unknownCapability"
NOT_JSON = ERROR_URN + "notJSON"
NOT_REQUEST = ERROR_URN + "notRequest"
LIMIT = ERROR_URN + "limit"


class Problem(Exception):
    """A request-level error: an RFC 7807 problem document."""

    def __init__(self, type_: str, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.type = type_
        self.status = status
        self.detail = detail
        self.extra = extra

    def document(self) -> dict[str, Any]:
        """The problem as JSON."""
        return {"type": self.type, "status": self.status, "detail": self.detail, **self.extra}

    def response(self, headers: dict[str, str] | None = None) -> JSONResponse:
        """The problem as an HTTP response (``application/problem+json``)."""
        return JSONResponse(
            self.document(),
            status_code=self.status,
            media_type="application/problem+json",
            headers=headers,
        )


class MethodError(Exception):
    """A method-level error; ``type`` is one of RFC 8620 §3.6.2 or a method's own."""

    def __init__(self, type_: str, description: str | None = None, **extra: Any) -> None:
        super().__init__(description or type_)
        self.type = type_
        self.description = description
        self.extra = extra

    def arguments(self) -> dict[str, Any]:
        """The arguments of the ``error`` response."""
        body: dict[str, Any] = {"type": self.type, **self.extra}
        if self.description:
            body["description"] = self.description
        return body


def invalid_arguments(description: str) -> MethodError:
    """The most common method error: the arguments are wrong, and how."""
    return MethodError("invalidArguments", description)


def set_error(type_: str, description: str, properties: list[str] | None = None) -> dict[str, Any]:
    """A SetError value for one object of a ``/set``."""
    error: dict[str, Any] = {"type": type_, "description": description}
    if properties is not None:
        error["properties"] = properties
    return error


class Refused(Exception):
    """One object of a /set or /import is refused, the others go on; ``error`` is its SetError."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("description", ""))
        self.error = error
