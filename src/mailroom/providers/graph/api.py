"""mailroom's Microsoft Graph mail client: typed calls over httpx, guarded and paced.

One :class:`GraphClient` per account (``account`` keys the concurrency limit),
usable from several threads. Every call:

1. gets a bearer token from the :class:`TokenSource` (``tokens()``), and after a
   ``401`` asks it once for a fresh one (``tokens(stale)``) and repeats the
   call; a second 401, or a source that refuses, is an AuthError;
2. holds one of the mailbox's four slots (:mod:`.limiter`) while on the wire;
3. goes through the SSRF guard (:mod:`mailroom.providers.guarded_http`); links
   the service hands back (``@odata.nextLink``, ``@odata.deltaLink``) must be on
   the configured host;
4. on ``429`` / ``503`` (and other 5xx with ``Retry-After``) waits the
   ``Retry-After`` seconds (fractional ok) and repeats, up to ``attempts`` tries
   and while the wait is at most ``max_wait``; otherwise raises RateLimitError
   carrying ``retry_after`` for the job to reschedule;
5. maps errors to provider errors (:mod:`.errors`), one plain sentence each.

With ``immutable_ids`` every request says ``Prefer: IdType="ImmutableId"``, so ids
survive folder moves; without, :meth:`GraphClient.move` returns the new id.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

import httpx

from mailroom.providers.base import AuthError, ProviderError, TransientError
from mailroom.providers.graph.errors import RETRYABLE, error_for, response_error, retry_after
from mailroom.providers.graph.limiter import SHARED_LIMITER, MailboxLimiter
from mailroom.providers.graph.models import (
    BatchRequest,
    BatchResult,
    DeltaPage,
    GraphFolder,
    GraphMessage,
    Removal,
)
from mailroom.providers.guarded_http import GuardedTransport, require_https

__all__ = ["DEFAULT_BASE_URL", "MAX_BATCH", "SYNC_SELECT", "GraphClient", "TokenSource"]

DEFAULT_BASE_URL = "https://graph.microsoft.com/v1.0"
MAX_BATCH = 20
IMMUTABLE = 'IdType="ImmutableId"'
# what a sync reads of each message in a delta (the MIME is fetched on its own)
SYNC_SELECT = (
    "id",
    "parentFolderId",
    "conversationId",
    "internetMessageId",
    "subject",
    "receivedDateTime",
    "isRead",
    "flag",
    "categories",
    "changeKey",
)


class TokenSource(Protocol):
    """Where the client gets bearer tokens.

    ``tokens()`` returns the current access token; ``tokens(stale)`` is called
    after Graph refused ``stale`` and must return a fresh one (refreshing it, or
    the current one if another thread already replaced ``stale``), or raise
    :class:`~mailroom.providers.base.AuthError` if the sign-in is refused.
    """

    def __call__(self, stale: str | None = None) -> str:
        """An access token (a fresh one when ``stale`` was refused)."""
        ...


def _quote(ident: str) -> str:
    return quote(ident, safe="")


class GraphClient:
    """Typed access to one mailbox through Microsoft Graph v1.0."""

    def __init__(
        self,
        tokens: TokenSource,
        *,
        account: Hashable,
        base_url: str = DEFAULT_BASE_URL,
        allowed_private_hosts: Iterable[str] = (),
        immutable_ids: bool = True,
        limiter: MailboxLimiter = SHARED_LIMITER,
        timeout: float = 30.0,
        attempts: int = 4,
        max_wait: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        require_https(base_url, "The Graph API URL")
        self.tokens = tokens
        self.account = account
        self.base_url = base_url.rstrip("/")
        self.immutable_ids = immutable_ids
        self.limiter = limiter
        self.attempts = max(1, attempts)
        self.max_wait = max_wait
        self.sleep = sleep
        self._origin = self._origin_of(self.base_url)
        self._token: str | None = None
        self._http = httpx.Client(
            transport=GuardedTransport(allowed_private_hosts),
            timeout=timeout,
            follow_redirects=False,
        )

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> GraphClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the request core ---------------------------------------------------------

    @staticmethod
    def _origin_of(url: str) -> tuple[str, str, int | None]:
        parts = urlsplit(url)
        return parts.scheme, (parts.hostname or "").lower(), parts.port

    def _url(self, path_or_link: str) -> str:
        if path_or_link.startswith(("http://", "https://")):
            if self._origin_of(path_or_link) != self._origin:
                raise ProviderError(
                    "Microsoft Graph answered with a link to another server; mailroom did "
                    "not follow it."
                )
            return path_or_link
        return f"{self.base_url}{path_or_link}"

    @property
    def prefer_ids(self) -> str | None:
        """The ``Prefer`` value for the id form (None for REST ids)."""
        return IMMUTABLE if self.immutable_ids else None

    def _headers(self, extra: Mapping[str, str] | None, token: str) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        prefer = [self.prefer_ids] if self.prefer_ids else []
        if extra:
            for name, value in extra.items():
                if name.lower() == "prefer":
                    prefer.append(value)
                else:
                    headers[name] = value
        if prefer:
            headers["Prefer"] = ", ".join(prefer)
        return headers

    def _current_token(self) -> str:
        if self._token is None:
            self._token = self.tokens()
        return self._token

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """One Graph call with refresh, pacing, retries and error mapping (2xx returned)."""
        url = self._url(path)
        refreshed = False
        attempt = 0
        while True:
            token = self._current_token()
            try:
                with self.limiter.slot(self.account):
                    response = self._http.request(
                        method,
                        url,
                        json=json,
                        content=content,
                        params=params,
                        headers=self._headers(headers, token),
                    )
            except httpx.TransportError as exc:
                raise TransientError(
                    "mailroom could not reach Microsoft's mail service; it will try again later.",
                    reason=f"network error: {type(exc).__name__}",
                ) from None
            if response.status_code == 401 and not refreshed:
                refreshed = True
                self._token = self.tokens(token)
                continue
            if response.status_code == 401:
                raise AuthError(
                    "Microsoft no longer accepts this account's sign-in; sign in again.",
                    reason="access token refused after a refresh",
                )
            if response.status_code in RETRYABLE:
                attempt += 1
                wait = self._wait(response.headers, attempt)
                if wait is not None:
                    self.sleep(wait)
                    continue
            if response.status_code >= 400:
                raise response_error(response)
            return response

    def _wait(self, headers: httpx.Headers | Mapping[str, str], attempt: int) -> float | None:
        """How long to wait before trying again, or None to give up now."""
        if attempt >= self.attempts:
            return None
        asked = retry_after(dict(headers))
        wait = asked if asked is not None else min(self.max_wait, 0.5 * 2 ** (attempt - 1))
        return wait if wait <= self.max_wait else None

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise TransientError(
                "Microsoft's mail service sent an answer mailroom could not read; it will try "
                "again later.",
                reason="response is not JSON",
            ) from None
        if not isinstance(body, dict):
            raise TransientError(
                "Microsoft's mail service sent an answer mailroom could not read; it will try "
                "again later.",
                reason="response is not a JSON object",
            )
        return body

    def get_json(self, path: str, **options: Any) -> dict[str, Any]:
        """GET a JSON object."""
        return self._json(self.request("GET", path, **options))

    # -- folders -------------------------------------------------------------------

    def _folder_pages(self, path: str, params: dict[str, str]) -> Iterator[dict[str, Any]]:
        link: str | None = path
        first = True
        while link:
            body = self.get_json(link, params=params if first else None)
            first = False
            yield from body.get("value", [])
            link = body.get("@odata.nextLink")

    def folders(self, *, include_hidden: bool = False, page_size: int = 100) -> list[GraphFolder]:
        """The whole folder tree, parents before children (each with its path)."""
        params = {"$top": str(page_size)}
        if include_hidden:
            params["includeHiddenFolders"] = "true"
        found: list[GraphFolder] = []

        def walk(path: str, above: tuple[str, ...]) -> None:
            for data in self._folder_pages(path, params):
                folder = GraphFolder.from_json(data, above)
                found.append(folder)
                if folder.child_count:
                    walk(f"/me/mailFolders/{_quote(folder.id)}/childFolders", folder.path)

        walk("/me/mailFolders", ())
        return found

    def folder(self, ref: str) -> GraphFolder:
        """One folder by id or well-known name (``inbox``, ``sentitems``, ...)."""
        return GraphFolder.from_json(self.get_json(f"/me/mailFolders/{_quote(ref)}"))

    def well_known_folders(self, names: Sequence[str]) -> dict[str, str]:
        """The folder id of each well-known name the mailbox has (one ``$batch``)."""
        parts = [BatchRequest(name, "GET", f"/me/mailFolders/{_quote(name)}") for name in names]
        return {r.id: str(r.body["id"]) for r in self.batch(parts) if r.ok and r.body}

    def create_folder(self, name: str, parent_id: str | None = None) -> GraphFolder:
        """A new folder at the top level or under ``parent_id`` (FolderExistsError if taken)."""
        path = (
            f"/me/mailFolders/{_quote(parent_id)}/childFolders" if parent_id else "/me/mailFolders"
        )
        body = self._json(self.request("POST", path, json={"displayName": name}))
        return GraphFolder.from_json(body)

    def rename_folder(self, folder_id: str, name: str) -> GraphFolder:
        """Give a folder a new display name."""
        body = self._json(
            self.request(
                "PATCH", f"/me/mailFolders/{_quote(folder_id)}", json={"displayName": name}
            )
        )
        return GraphFolder.from_json(body)

    def move_folder(self, folder_id: str, destination_id: str) -> GraphFolder:
        """Put a folder (and what it holds) under ``destination_id``; it keeps its id."""
        body = self._json(
            self.request(
                "POST",
                f"/me/mailFolders/{_quote(folder_id)}/move",
                json={"destinationId": destination_id},
            )
        )
        return GraphFolder.from_json(body)

    def delete_folder(self, folder_id: str) -> None:
        """Delete a folder (with what it holds)."""
        self.request("DELETE", f"/me/mailFolders/{_quote(folder_id)}")

    # -- delta ---------------------------------------------------------------------

    def delta(
        self,
        folder_id: str,
        link: str | None = None,
        *,
        page_size: int = 50,
        select: Sequence[str] = SYNC_SELECT,
    ) -> Iterator[DeltaPage]:
        """The pages of one delta round of a folder, following nextLinks to the deltaLink.

        Without ``link`` the round enumerates the folder (import); with a stored
        deltaLink it returns the changes since (sync); a stored nextLink resumes
        a round. An expired link raises InvalidCursorError.
        """
        prefer = {"Prefer": f"odata.maxpagesize={page_size}"}
        current: str | None = link
        params: dict[str, str] | None = None
        if current is None:
            current = f"/me/mailFolders/{_quote(folder_id)}/messages/delta"
            params = {"$select": ",".join(select)} if select else None
        while current is not None:
            body = self.get_json(current, params=params, headers=prefer)
            params = None
            page = _delta_page(body)
            yield page
            current = page.next_link

    # -- messages ------------------------------------------------------------------

    def message(self, message_id: str, select: Sequence[str] = ()) -> GraphMessage:
        """One message's properties."""
        params = {"$select": ",".join(select)} if select else None
        return GraphMessage.from_json(
            self.get_json(f"/me/messages/{_quote(message_id)}", params=params)
        )

    def mime(self, message_id: str) -> bytes:
        """The raw RFC 822 bytes of a message."""
        response = self.request("GET", f"/me/messages/{_quote(message_id)}/$value")
        return response.content

    def move(self, message_id: str, destination: str) -> str:
        """Move a message to a folder (id or well-known name); returns its id there."""
        body = self._json(
            self.request(
                "POST",
                f"/me/messages/{_quote(message_id)}/move",
                json={"destinationId": destination},
            )
        )
        return str(body["id"])

    def update(
        self,
        message_id: str,
        *,
        is_read: bool | None = None,
        flag_status: str | None = None,
        categories: Sequence[str] | None = None,
    ) -> GraphMessage:
        """PATCH read state, flag status and/or categories."""
        body = update_body(is_read=is_read, flag_status=flag_status, categories=categories)
        answer = self._json(self.request("PATCH", f"/me/messages/{_quote(message_id)}", json=body))
        return GraphMessage.from_json(answer)

    def delete(self, message_id: str, *, permanent: bool = False) -> None:
        """Delete a message: to Deleted Items, or for good."""
        if permanent:
            self.request("POST", f"/me/messages/{_quote(message_id)}/permanentDelete")
        else:
            self.request("DELETE", f"/me/messages/{_quote(message_id)}")

    def send_mime(self, raw: bytes) -> None:
        """Send a complete RFC 822 message (``sendMail`` with the MIME as base64)."""
        self.request(
            "POST",
            "/me/sendMail",
            content=base64.b64encode(raw),
            headers={"Content-Type": "text/plain"},
        )

    # -- $batch ------------------------------------------------------------------

    def batch(self, requests: Sequence[BatchRequest]) -> list[BatchResult]:
        """Run requests in ``$batch`` chunks of 20; one result per request, in order.

        A ``dependsOn`` must name an earlier request of the same chunk of 20.
        Parts answered 429/503 are sent again (with the parts that failed only
        because they depended on them) after their Retry-After, as calls are.
        """
        results: list[BatchResult] = []
        for start in range(0, len(requests), MAX_BATCH):
            chunk = list(requests[start : start + MAX_BATCH])
            ids = {part.id for part in chunk}
            for part in chunk:
                if any(d not in ids for d in part.depends_on):
                    raise ValueError(f"request {part.id} depends on one outside its batch of 20")
            results.extend(self._batch_chunk(chunk))
        return results

    def _batch_chunk(self, chunk: list[BatchRequest]) -> list[BatchResult]:
        settled: dict[str, BatchResult] = {}
        pending = chunk
        attempt = 0
        while pending:
            answered = self._post_batch(pending)
            again: list[BatchRequest] = []
            waits: list[float] = []
            for part in pending:
                result = answered[part.id]
                again_ids = {p.id for p in again}
                if result.status in (429, 503):
                    again.append(part)
                    waits.append(retry_after(dict(result.headers)) or 0.0)
                elif result.status == 424 and part.depends_on and set(part.depends_on) <= again_ids:
                    again.append(part)
                settled[part.id] = result
            attempt += 1
            wait = self._wait({"Retry-After": str(max(waits, default=0.0))}, attempt)
            if not again or wait is None:
                break
            self.sleep(wait)
            pending = again
        return [settled[part.id] for part in chunk]

    def _post_batch(self, parts: list[BatchRequest]) -> dict[str, BatchResult]:
        sent = frozenset(p.id for p in parts)
        body = self._json(
            self.request(
                "POST",
                "/$batch",
                json={"requests": [p.to_json(self.prefer_ids, sent) for p in parts]},
            )
        )
        answered: dict[str, BatchResult] = {}
        for item in body.get("responses", []):
            status = int(item.get("status", 0))
            headers = {str(k): str(v) for k, v in (item.get("headers") or {}).items()}
            error = error_for(status, item.get("body"), headers) if status >= 400 else None
            answered[str(item.get("id"))] = BatchResult(
                str(item.get("id")), status, item.get("body"), headers, error
            )
        for part in parts:
            if part.id not in answered:
                raise TransientError(
                    "Microsoft's mail service left part of a batch unanswered; mailroom will "
                    "try again later.",
                    reason=f"batch part {part.id} missing",
                )
        return answered


def update_body(
    *,
    is_read: bool | None = None,
    flag_status: str | None = None,
    categories: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The PATCH body for a message's read state, flag and categories."""
    body: dict[str, Any] = {}
    if is_read is not None:
        body["isRead"] = is_read
    if flag_status is not None:
        body["flag"] = {"flagStatus": flag_status}
    if categories is not None:
        body["categories"] = list(categories)
    return body


def _delta_page(body: Mapping[str, Any]) -> DeltaPage:
    messages: list[GraphMessage] = []
    removals: list[Removal] = []
    for item in body.get("value", []):
        removed = item.get("@removed")
        if isinstance(removed, dict):
            removals.append(Removal(str(item["id"]), str(removed.get("reason", "deleted"))))
        else:
            messages.append(GraphMessage.from_json(item))
    next_link = body.get("@odata.nextLink")
    delta_link = body.get("@odata.deltaLink")
    if next_link is None and delta_link is None:
        raise TransientError(
            "Microsoft's mail service ended a sync page without saying how to go on; mailroom "
            "will try again later.",
            reason="delta page without nextLink or deltaLink",
        )
    return DeltaPage(tuple(messages), tuple(removals), next_link, delta_link)
