"""One logged-in IMAP connection, with clear errors and the few commands sync needs.

``connect()`` runs the SSRF guard (:mod:`mailroom.providers.netguard`), opens TCP to
the vetted address (TLS is still checked against the host *name*), upgrades with
STARTTLS when asked, logs in and switches on QRESYNC (or CONDSTORE) when the
server offers it. Every failure becomes one of the provider errors with one plain
sentence:

* refused login, blocked host, bad certificate, TLS mismatch → :class:`AuthError`
  (the owner must fix the account; retrying does not help);
* refused/timed-out/dropped connections, DNS failures → :class:`TransientError`;
* a command the server answers with NO/BAD → :class:`CommandError` (the caller
  decides: usually it costs one message or one folder, not the sync).

The wrapper speaks UIDs only. IMAPClient is used for parsing and for the commands
it models well; the few it does not (``UID FETCH 1:*`` with ``CHANGEDSINCE`` /
``VANISHED`` modifiers, ESEARCH) go through its imaplib connection.
"""

from __future__ import annotations

import contextlib
import functools
import imaplib
import logging
import re
import select
import socket
import ssl
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from imapclient import IMAPClient  # type: ignore[import-untyped]
from imapclient.exceptions import (  # type: ignore[import-untyped]
    IMAPClientAbortError,
    IMAPClientError,
    LoginError,
)
from imapclient.imapclient import _parse_untagged_response  # type: ignore[import-untyped]

from mailroom.errors import ProviderError
from mailroom.providers import netguard
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.imap.account import ImapConfig
from mailroom.providers.imap.fetchparse import MalformedFetch, read_fetch
from mailroom.providers.imap.mirror import normalize_flags

__all__ = [
    "CommandError",
    "FolderStatus",
    "ImapConnection",
    "ListedFolder",
    "connect",
    "parse_uid_set",
    "uid_set",
]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
FetchData = dict[bytes, Any]


class CommandError(ProviderError):
    """The server answered one command with NO or BAD."""


@dataclass(frozen=True, slots=True)
class ListedFolder:
    """One LIST answer: name, hierarchy delimiter and attributes (``\\Sent``, ``\\Noselect``)."""

    name: str
    delimiter: str | None
    flags: frozenset[str]

    @property
    def selectable(self) -> bool:
        """Whether the folder can hold messages."""
        return not {"\\noselect", "\\nonexistent"} & {f.lower() for f in self.flags}


@dataclass(frozen=True, slots=True)
class FolderStatus:
    """What SELECT/EXAMINE told about a folder."""

    uidvalidity: int
    uidnext: int | None
    exists: int
    highest_modseq: int | None
    # Lower-cased: the flags defined in the folder (FLAGS) and those a client may
    # store for good (PERMANENTFLAGS; ``\*`` = any new keyword; None = not sent,
    # which RFC 3501 says means all; empty when EXAMINEd).
    flags: frozenset[str] = frozenset()
    permanent_flags: frozenset[str] | None = None

    def can_store(self, flag: str) -> bool:
        """Whether a flag set in this (read-write) folder is kept for good (PERMANENTFLAGS)."""
        permanent = self.permanent_flags
        return permanent is None or "\\*" in permanent or flag.lower() in permanent


# -- sequence sets -----------------------------------------------------------------


def uid_set(uids: Iterable[int]) -> str:
    """A compact IMAP sequence set (``1:4,7,9:10``) for the given UIDs."""
    ordered = sorted(set(uids))
    if not ordered:
        raise ValueError("empty UID set")
    parts: list[str] = []
    start = prev = ordered[0]
    for uid in ordered[1:]:
        if uid == prev + 1:
            prev = uid
            continue
        parts.append(str(start) if start == prev else f"{start}:{prev}")
        start = prev = uid
    parts.append(str(start) if start == prev else f"{start}:{prev}")
    return ",".join(parts)


def parse_uid_set(text: str) -> list[int]:
    """The UIDs of a sequence set without ``*`` (``1:3,7`` → [1, 2, 3, 7])."""
    uids: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if ":" in part:
            low, high = (int(x) for x in part.split(":", 1))
            if low > high:
                low, high = high, low
            uids.extend(range(low, high + 1))
        else:
            uids.append(int(part))
    return uids


_ESEARCH_ALL = re.compile(rb"\bALL\s+([0-9:,]+)", re.IGNORECASE)


# -- sockets pinned to the vetted address ----------------------------------------


class _PinnedPlain(imaplib.IMAP4):
    """imaplib over TCP to a fixed address (``host`` is kept for TLS and logging)."""

    def __init__(self, host: str, address: str, port: int, timeout: float | None) -> None:
        self._address = address
        self._connect_timeout = timeout
        super().__init__(host, port, timeout=timeout)

    def _create_socket(self, timeout: float | None = None) -> socket.socket:
        return socket.create_connection(
            (self._address, self.port), timeout if timeout is not None else self._connect_timeout
        )


class _PinnedTLS(imaplib.IMAP4):
    """imaplib over implicit TLS to a fixed address, verifying the certificate for ``host``."""

    def __init__(
        self, host: str, address: str, port: int, context: ssl.SSLContext, timeout: float | None
    ) -> None:
        self._address = address
        self._context = context
        self._connect_timeout = timeout
        super().__init__(host, port, timeout=timeout)

    def _create_socket(self, timeout: float | None = None) -> socket.socket:
        sock = socket.create_connection(
            (self._address, self.port), timeout if timeout is not None else self._connect_timeout
        )
        try:
            return self._context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise


class _PinnedClient(IMAPClient):  # type: ignore[misc]
    def __init__(self, host: str, address: str, **kwargs: Any) -> None:
        self._pinned_address = address
        super().__init__(host, **kwargs)

    def _create_IMAP4(self) -> imaplib.IMAP4:  # noqa: N802 - IMAPClient's name
        connect_timeout = getattr(self._timeout, "connect", None)
        if self.ssl:
            return _PinnedTLS(
                self.host, self._pinned_address, self.port, self.ssl_context, connect_timeout
            )
        return _PinnedPlain(self.host, self._pinned_address, self.port, connect_timeout)


# -- the connection ---------------------------------------------------------------


class ImapConnection:
    """A logged-in IMAP connection (UIDs only); close it with ``close()`` or ``with``."""

    def __init__(self, client: Any, config: ImapConfig) -> None:
        self.client = client
        self.config = config
        self.selected: str | None = None
        self.readonly = True
        self.closed = False
        self.capabilities: frozenset[str] = frozenset(
            (c.decode() if isinstance(c, bytes) else str(c)).upper() for c in client.capabilities()
        )
        self.qresync = False
        self.condstore = False
        self._early_idle: list[tuple[Any, ...]] = []
        self.hints: dict[int, bool] = {}  # folder id -> fetch bodies with envelopes
        self.selected_status: FolderStatus | None = None
        self.attached: dict[str, Any] = {}  # per-connection helpers (the importer's look-ahead)
        self.relogin: Relogin | None = None  # set by ``connect``
        self.on_close: list[Callable[[], None]] = []

    # -- plumbing ---------------------------------------------------------------

    def __enter__(self) -> ImapConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def has(self, capability: str) -> bool:
        """Whether the server advertised ``capability`` (after login)."""
        return capability.upper() in self.capabilities

    @contextlib.contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Translate socket and protocol failures of ``what`` into provider errors."""
        try:
            yield
        except ProviderError:
            raise
        except IMAPClientAbortError as exc:
            self._drop()
            raise TransientError(
                f"The connection to {self.config.host} broke during {what} ({_short(exc)}); "
                "the next sync continues where this one stopped."
            ) from None
        except (OSError, EOFError) as exc:
            self._drop()
            raise TransientError(
                f"The connection to {self.config.host} was lost during {what} ({_short(exc)}); "
                "the next sync continues where this one stopped."
            ) from None
        except IMAPClientError as exc:
            raise CommandError(f"The server refused {what}: {_short(exc)}.") from None

    def _drop(self) -> None:
        """Close the socket of a connection that broke (no LOGOUT: nobody is listening)."""
        self.closed = True
        with contextlib.suppress(Exception):
            self.client.shutdown()

    def close(self) -> None:
        """Log out (best effort), close the socket, release what is attached to it."""
        for closer in self.on_close:
            with contextlib.suppress(Exception):
                closer()
        self.on_close.clear()
        if self.closed:
            return
        self.closed = True
        try:
            self.client.logout()
        except Exception:  # noqa: BLE001 - the connection may already be gone
            with contextlib.suppress(Exception):
                self.client.shutdown()

    @property
    def imap(self) -> imaplib.IMAP4:
        """The underlying imaplib connection (for commands IMAPClient does not model)."""
        imap: imaplib.IMAP4 = self.client._imap
        return imap

    # -- folders ----------------------------------------------------------------

    def list_folders(self) -> list[ListedFolder]:
        """Every folder the server lists (``LIST "" "*"``), special-use flags included."""
        with self.guard("listing folders"):
            listed = self.client.list_folders()
        folders: list[ListedFolder] = []
        for flags, delimiter, name in listed:
            folders.append(
                ListedFolder(
                    name=name if isinstance(name, str) else name.decode("utf-8", "replace"),
                    delimiter=(delimiter.decode() if isinstance(delimiter, bytes) else delimiter),
                    flags=frozenset(f.decode() if isinstance(f, bytes) else str(f) for f in flags),
                )
            )
        return folders

    def select(self, path: str, readonly: bool = True) -> FolderStatus:
        """SELECT (or EXAMINE when ``readonly``) a folder; returns its status."""
        with self.guard(f"opening the folder {path!r}"):
            info = self.client.select_folder(path, readonly=readonly)
        self.selected, self.readonly = path, readonly
        modseq = info.get(b"HIGHESTMODSEQ")
        uidnext = info.get(b"UIDNEXT")
        self.selected_status = FolderStatus(
            uidvalidity=int(info[b"UIDVALIDITY"]),
            uidnext=int(uidnext) if uidnext is not None else None,
            exists=int(info.get(b"EXISTS", 0)),
            highest_modseq=int(modseq) if modseq is not None and self.condstore else None,
            flags=normalize_flags(info.get(b"FLAGS") or ()),
            permanent_flags=(
                normalize_flags(info[b"PERMANENTFLAGS"]) if b"PERMANENTFLAGS" in info else None
            ),
        )
        return self.selected_status

    def ensure_selected(self, path: str, readonly: bool = True) -> None:
        """Select ``path`` unless it is already selected with enough rights."""
        if self.selected == path and (readonly or not self.readonly):
            return
        self.select(path, readonly=readonly)

    def status(self, path: str) -> dict[str, int]:
        """STATUS of a folder that need not be selected (UIDVALIDITY, UIDNEXT, MESSAGES)."""
        with self.guard(f"asking about the folder {path!r}"):
            info = self.client.folder_status(path, [b"UIDVALIDITY", b"UIDNEXT", b"MESSAGES"])
        return {k.decode() if isinstance(k, bytes) else str(k): int(v) for k, v in info.items()}

    def create_folder(self, path: str) -> None:
        """CREATE a folder (and subscribe to it)."""
        with self.guard(f"creating the folder {path!r}"):
            self.client.create_folder(path)
        with contextlib.suppress(ProviderError), self.guard("subscribing"):
            self.client.subscribe_folder(path)

    # -- searching and fetching -------------------------------------------------

    def uids(self, spec: str = "1:*") -> list[int]:
        """The UIDs in the selected folder within ``spec`` (ascending, no ``*`` quirk)."""
        with self.guard("listing messages"):
            if self.has("ESEARCH"):
                data = self.client._raw_command_untagged(
                    b"SEARCH", [b"RETURN", b"(ALL)", b"UID", spec.encode()], response_name="ESEARCH"
                )
                found: list[int] = []
                for line in data:
                    if isinstance(line, bytes) and (match := _ESEARCH_ALL.search(line)):
                        found.extend(parse_uid_set(match.group(1).decode()))
            else:
                found = [int(u) for u in self.client.search(["UID", spec])]
        low, _, high = spec.partition(":")
        minimum = int(low) if low.isdigit() else 1
        maximum = (
            int(high) if high.isdigit() else (int(low) if low.isdigit() and not high else None)
        )
        return sorted(u for u in set(found) if u >= minimum and (maximum is None or u <= maximum))

    def search_header(self, name: str, value: str, spec: str = "1:*") -> list[int]:
        """UIDs whose header ``name`` contains ``value`` (within the UID range ``spec``)."""
        with self.guard("searching"):
            found = self.client.search(["UID", spec, "HEADER", name, value])
        return sorted(int(u) for u in found)

    def fetch(
        self, uids: str, items: Sequence[str], modifiers: Sequence[str] = ()
    ) -> dict[int, FetchData]:
        """``UID FETCH uids (items) (modifiers)``; a dict UID → data. NO raises CommandError."""
        args = ["FETCH", uids, "(" + " ".join(items) + ")"]
        if modifiers:
            args.append("(" + " ".join(modifiers) + ")")
        with self.guard("fetching messages"):
            tag = self.imap._command("UID", *args)
            typ, data = self.imap._command_complete("FETCH", tag)
            if typ != "OK":
                raise CommandError(f"The server refused to fetch messages: {_short_data(data)}.")
            typ, data = self.imap._untagged_response(typ, data, "FETCH")
            try:
                return read_fetch(data)
            except MalformedFetch as exc:
                raise CommandError(
                    f"The server's answer to fetching messages cannot be read ({exc})."
                ) from None

    def take_vanished(self) -> list[int]:
        """UIDs the server reported as VANISHED in the selected folder since the last call."""
        found: list[int] = []
        for line in self.imap.untagged_responses.pop("VANISHED", []):
            text = line.decode() if isinstance(line, bytes) else str(line)
            text = text.replace("(EARLIER)", "").strip()
            if text:
                found.extend(parse_uid_set(text))
        return found

    # -- changing messages ------------------------------------------------------

    def set_flags(self, uids: Sequence[int], add: Sequence[str], remove: Sequence[str]) -> None:
        """Add and remove flags on messages of the selected (read-write) folder."""
        with self.guard("changing flags"):
            if add:
                self.client.add_flags(list(uids), [f.encode() for f in add], silent=True)
            if remove:
                self.client.remove_flags(list(uids), [f.encode() for f in remove], silent=True)

    def move(self, uids: Sequence[int], target: str) -> tuple[int | None, dict[int, int]]:
        """Move messages to ``target``; returns (target UIDVALIDITY, source UID → new UID).

        Uses MOVE, else COPY + ``\\Deleted`` + (UID) EXPUNGE. The UID map comes from
        COPYUID (UIDPLUS) and is empty when the server does not tell.
        """
        self.imap.untagged_responses.pop("COPYUID", None)
        with self.guard(f"moving messages to {target!r}"):
            if self.has("MOVE"):
                response = self.client.move(list(uids), target)
            else:
                response = self.client.copy(list(uids), target)
        copyuid: list[Any] = [*self.imap.untagged_responses.pop("COPYUID", [])]
        if isinstance(response, bytes):
            copyuid.extend(re.findall(rb"\[COPYUID ([^\]]+)\]", response))
        if not self.has("MOVE"):
            self.expunge(uids)
        return _parse_copyuid(copyuid)

    def expunge(self, uids: Sequence[int]) -> None:
        """Delete messages of the selected folder for good (``\\Deleted`` + UID EXPUNGE)."""
        with self.guard("deleting messages"):
            self.client.add_flags(list(uids), [b"\\Deleted"], silent=True)
            if self.has("UIDPLUS"):
                self.client.uid_expunge(list(uids))
            else:  # pragma: no cover - every server we test has UIDPLUS
                self.client.expunge()

    # -- IDLE -------------------------------------------------------------------

    def idle(self) -> None:
        """Enter IDLE in the selected folder."""
        with self.guard("starting IDLE"):
            self.client.idle()
            # The server may send changes right behind "+ idling"; imaplib's buffered reader
            # then already holds them and polling the socket would never see them.
            self._early_idle = self._buffered_responses()

    def _line_waiting(self) -> bool:
        """Whether imaplib's reader (or the TLS layer) already holds received bytes."""
        sock = self.client.socket()
        pending = getattr(sock, "pending", None)
        if callable(pending) and pending() > 0:
            return True
        reader = getattr(self.imap, "file", None)
        if reader is None or not hasattr(reader, "peek"):
            return False
        sock.setblocking(False)
        try:
            return bool(reader.peek(1))
        except OSError:
            return False
        finally:
            sock.setblocking(True)
            self.client._set_read_timeout()

    def _buffered_responses(self) -> list[tuple[Any, ...]]:
        responses: list[tuple[Any, ...]] = []
        while self._line_waiting():
            responses.append(_parse_untagged_response(self.imap._get_line()))
        return responses

    def idle_check(self, timeout: float) -> list[tuple[Any, ...]]:
        """Wait up to ``timeout`` seconds for IDLE responses.

        Unlike IMAPClient's ``idle_check``, a connection closed by the server raises
        :class:`TransientError` instead of looking like "nothing happened".
        """
        early, self._early_idle = self._early_idle, []
        if early:
            return early
        with self.guard("waiting in IDLE"):
            if not self._line_waiting():
                ready, _w, _x = select.select([self.client.socket()], [], [], timeout)
                if not ready:
                    return []
            responses = [_parse_untagged_response(self.imap._get_line())]  # EOF raises
            responses.extend(self._buffered_responses())
        return responses

    def idle_done(self) -> list[tuple[Any, ...]]:
        """Leave IDLE; returns responses that arrived meanwhile."""
        with self.guard("ending IDLE"):
            _text, responses = self.client.idle_done()
        return list(responses)


def _parse_copyuid(lines: Iterable[Any]) -> tuple[int | None, dict[int, int]]:
    mapping: dict[int, int] = {}
    validity: int | None = None
    for line in lines:
        text = line.decode() if isinstance(line, bytes) else str(line)
        parts = text.split()
        if len(parts) != 3:
            continue
        try:
            validity = int(parts[0])
            sources, targets = parse_uid_set(parts[1]), parse_uid_set(parts[2])
        except ValueError:
            continue
        mapping.update(zip(sources, targets, strict=False))
    return validity, mapping


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    for prefix in ("b'", 'b"'):
        text = text.replace(prefix, "'")
    return text.splitlines()[0][:200]


def _cause(exc: BaseException | None) -> str:
    """A failed connection's cause in a few lower-case words ("connection refused")."""
    if exc is None:
        return "no address to connect to"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    strerror = getattr(exc, "strerror", None)
    return (strerror or _short(exc)).lower()


def _short_data(data: Any) -> str:
    if isinstance(data, list | tuple) and data:
        first = data[0]
        return (first.decode("utf-8", "replace") if isinstance(first, bytes) else str(first))[:200]
    return "no reason given"


def _bad_certificate(config: ImapConfig, exc: ssl.SSLCertVerificationError) -> AuthError:
    return AuthError(
        f"The server {config.host} presented a certificate that is not valid for it "
        f"({exc.verify_message or 'verification failed'}); check the host name.",
        reason=f"TLS certificate not trusted ({exc.verify_message or 'verification failed'})",
    )


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the system CA store takes ~0.3 s; every connection paid it (one per
    # propagation job). A context is safe to share between connections and threads.
    return ssl.create_default_context(purpose=ssl.Purpose.SERVER_AUTH)


@dataclass(frozen=True)
class Relogin:
    """What it takes to open another connection like this one (for a worker process)."""

    config: ImapConfig
    password: str = field(repr=False)
    allowed_hosts: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT

    def connect(self) -> ImapConnection:
        """Log in again with the same settings."""
        return connect(
            self.config, self.password, allowed_hosts=self.allowed_hosts, timeout=self.timeout
        )


def connect(
    config: ImapConfig,
    password: str,
    *,
    allowed_hosts: Iterable[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    ssl_context: ssl.SSLContext | None = None,
) -> ImapConnection:
    """Open, secure and log in; switch on QRESYNC/CONDSTORE when offered."""
    allowed = tuple(allowed_hosts)
    addresses = netguard.check_host(config.host, config.port, allowed)
    where = f"{config.host}:{config.port}"
    context = ssl_context or (_tls_context() if config.tls != "none" else None)
    client: Any = None
    last: BaseException | None = None
    for address in addresses:
        try:
            client = _PinnedClient(
                config.host,
                address,
                port=config.port,
                ssl=config.tls == "ssl",
                ssl_context=context if config.tls == "ssl" else None,
                timeout=timeout,
            )
            break
        except ssl.SSLCertVerificationError as exc:
            raise _bad_certificate(config, exc) from None
        except ssl.SSLError:
            raise AuthError(
                f"The TLS handshake with {where} failed; check --tls and --port (implicit TLS "
                "is usually port 993, STARTTLS port 143).",
                reason="TLS handshake failed; check --tls and --port",
            ) from None
        except (OSError, IMAPClientError) as exc:
            last = exc
    if client is None:
        raise TransientError(
            f"Cannot connect to {where} ({_short(last) if last else 'no address'}); "
            "the next sync will try again.",
            reason=f"cannot connect: {_cause(last)}",
        )
    try:
        if config.tls == "starttls":
            try:
                client.starttls(context)
            except ssl.SSLCertVerificationError as exc:
                raise _bad_certificate(config, exc) from None
            except ssl.SSLError:
                raise AuthError(
                    f"The STARTTLS handshake with {where} failed.",
                    reason="STARTTLS handshake failed",
                ) from None
            except IMAPClientAbortError:
                raise
            except IMAPClientError:
                raise AuthError(
                    f"The server {where} does not offer STARTTLS; use --tls ssl (port 993) "
                    "or, on a trusted network only, --tls none.",
                    reason="the server does not offer STARTTLS; use --tls ssl",
                ) from None
        try:
            client.login(config.login, password)
        except LoginError:
            raise AuthError(
                f"The server {config.host} refused the login for {config.login!r}; check the "
                "user name and password.",
                reason="the server refused the login; check the user name and password",
            ) from None
        client.normalise_times = False
        connection = ImapConnection(client, config)
        with connection.guard("switching on change tracking"):
            if connection.has("QRESYNC"):
                connection.client.enable("QRESYNC")
                connection.qresync = connection.condstore = True
            elif connection.has("CONDSTORE"):
                with contextlib.suppress(IMAPClientError):
                    connection.client.enable("CONDSTORE")
                connection.condstore = True
        if ssl_context is None:  # a worker can log in the same way (see .remote)
            connection.relogin = Relogin(config, password, allowed, timeout)
        return connection
    except AuthError:
        with contextlib.suppress(Exception):
            client.shutdown()
        raise
    except ProviderError:
        with contextlib.suppress(Exception):
            client.shutdown()
        raise
    except (OSError, EOFError, IMAPClientError) as exc:
        with contextlib.suppress(Exception):
            client.shutdown()
        raise TransientError(
            f"The connection to {where} failed while logging in ({_short(exc)}); "
            "the next sync will try again."
        ) from None
