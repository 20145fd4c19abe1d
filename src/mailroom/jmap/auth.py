"""Who is asking: passwords, API tokens, the HTTP ``Authorization`` header, the lock-out.

Passwords are hashed with scrypt (stdlib ``hashlib.scrypt``, N=2^14, r=8,
p=1, 16-byte random salt) and stored as
``scrypt$N$r$p$<salt base64>$<key base64>``. API tokens are random
(``mrt_`` + 32 random bytes, URL-safe base64); only their SHA-256 is stored,
so the database never holds a usable credential.

JMAP accepts HTTP Basic (user name and password) and ``Bearer`` tokens.
scrypt costs tens of milliseconds on purpose, so a successful Basic login
is remembered in process (keyed by a hash of name and password, checked
against the stored hash on every request): a password change or a deleted
user takes effect at once, and a client sending Basic on every request does
not pay scrypt every time.

API tokens may carry an expiry (``expires_at``); an expired token is refused
like an unknown one. ``last_used_at`` is written at most every 10 minutes.

Sign-in lock-out (web sign-in and JMAP Basic share it, through
:meth:`Authenticator.sign_in`): every password check first records a failure
row under two keys, ``name:<SHA-256 of the user name>`` and
``addr:<client address>`` (an IPv6 client counts by its /64, which one
attacker usually holds whole), and
deletes it again when the password is right. So parallel guesses see each
other, and a check that crashes counts as failed. A key with
``max_failures_per_name`` / ``max_failures_per_address`` failures inside the
last ``window`` is locked: every password sign-in under it, even with the
right password, is refused with :class:`LockedOut` (429 and ``Retry-After``)
without looking at the password, until the oldest of those failures leaves
the window. Refused attempts are not recorded, so the lock clears one window
after the last counted failure at the latest, whatever the attacker keeps
sending. Names that do not exist count and lock the same way, and their
password is checked against a dummy scrypt hash, so neither the answer nor
its time says whether a user exists.

The counter is a table (``sign_in_failures``), not process memory, so it
holds across every HTTP process on one PostgreSQL (or SQLite) store. A
lock-out is written once to the operator log (``mailroom.operator``) when a
key reaches its limit. Bearer tokens are not counted: 256 random bits are not
guessed, and a phone retrying a revoked token must not lock out its owner's
address. Locking a name lets anyone deny that user password sign-ins for a
window; that is the price of stopping guessing, and token clients and
already signed-in web sessions are unaffected.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import logging
import math
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from mailroom.audit import Origin, record
from mailroom.config import Settings
from mailroom.errors import ConfigError, NotFoundError
from mailroom.owners import get_or_create_user, get_user
from mailroom.store.engine import Store
from mailroom.store.models import ApiToken, SignInFailure, User, utcnow

operator_log = logging.getLogger("mailroom.operator")

SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1
TOKEN_PREFIX = "mrt_"
_CACHE_SIZE = 1024
_TOKEN_TOUCH = timedelta(minutes=10)  # last_used_at is written at most this often


def hash_password(password: str) -> str:
    """The storable scrypt hash of ``password``."""
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    encode = base64.b64encode
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${encode(salt).decode()}${encode(key).decode()}"


def verify_password(password: str, stored: str | None) -> bool:
    """Whether ``password`` matches the stored hash (False for any malformed hash)."""
    if not stored:
        return False
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        return False
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt = base64.b64decode(parts[4], validate=True)
        expected = base64.b64decode(parts[5], validate=True)
        key = hashlib.scrypt(
            password.encode(), salt=salt, n=n, r=r, p=p, dklen=len(expected), maxmem=2**27
        )
    except (ValueError, binascii.Error):
        return False
    return hmac.compare_digest(key, expected)


def token_digest(token: str) -> str:
    """The SHA-256 (hex) under which a token is stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def set_password(session: Session, name: str, password: str, origin: Origin | None = None) -> bool:
    """Set the password of user ``name``, creating the user; True if the user is new.

    Audited (``user.create`` or ``user.password``) in the caller's transaction.
    """
    if not password:
        raise ConfigError("The password is empty; give a password of at least one character.")
    existed = session.scalar(select(User.id).where(User.name == name)) is not None
    user = get_or_create_user(session, name)
    user.password_hash = hash_password(password)
    action = "user.password" if existed else "user.create"
    record(session, action, user_name=user.name, user_id=user.id, origin=origin)
    return not existed


def create_token(
    session: Session,
    user_name: str,
    name: str = "",
    expires_at: datetime | None = None,
    origin: Origin | None = None,
) -> str:
    """A new API token of an existing user; the token itself is shown only here.

    Audited (``token.create``, with the token's id and name) in the caller's transaction.
    """
    user = get_user(session, user_name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(
        user_id=user.id,
        token_sha256=token_digest(token),
        name=name[:200],
        expires_at=expires_at,
    )
    session.add(row)
    session.flush()
    record(
        session,
        "token.create",
        user_name=user.name,
        user_id=user.id,
        origin=origin,
        detail=_token_detail(row),
    )
    return token


def _token_detail(token: ApiToken) -> str:
    named = f" ({token.name})" if token.name else ""
    return f"token {token.id}{named}"


def list_tokens(session: Session, user_name: str) -> Sequence[ApiToken]:
    """The API tokens of an existing user, oldest first."""
    user = get_user(session, user_name)
    return session.scalars(
        select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id)
    ).all()


def revoke_token(session: Session, token_id: int, origin: Origin | None = None) -> ApiToken:
    """Delete API token ``token_id`` (it stops working at once); the row it was.

    Audited (``token.revoke``) in the caller's transaction.
    """
    token = session.get(ApiToken, token_id)
    if token is None:
        raise NotFoundError(
            f"There is no API token {token_id}; `mailroom token list USER` shows the ids."
        )
    owner = session.get(User, token.user_id)
    session.delete(token)
    record(
        session,
        "token.revoke",
        user_name=owner.name if owner is not None else None,
        user_id=token.user_id,
        origin=origin,
        detail=_token_detail(token),
    )
    return token


@cache
def _dummy_hash() -> str:
    """A hash with the real parameters, checked for unknown users so they cost the same."""
    return hash_password(secrets.token_urlsafe(16))


def name_key(name: str) -> str:
    """The limiter key of a user name: its digest (a name field may hold a password)."""
    return "name:" + hashlib.sha256(name.encode()).hexdigest()


def address_key(address: str | None) -> str:
    """The limiter key of a client address (an IPv6 address counts by its /64)."""
    if not address:
        return "addr:unknown"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "addr:#" + hashlib.sha256(address.encode()).hexdigest()[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"addr:{ip.ipv4_mapped}"
        return f"addr:{ipaddress.IPv6Network((ip, 64), strict=False)}"
    return f"addr:{ip}"


class LockedOut(Exception):
    """Too many failed sign-ins under a name or an address; ``retry_after`` in seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"Too many failed sign-ins; try again in {retry_after} seconds.")
        self.retry_after = retry_after

    @property
    def minutes(self) -> int:
        """The wait in whole minutes, rounded up (at least 1), for people."""
        return max(1, math.ceil(self.retry_after / 60))


@dataclass(frozen=True)
class LockoutPolicy:
    """How many failed sign-ins a name and an address may have inside ``window``."""

    max_failures_per_name: int = 10
    max_failures_per_address: int = 30
    window: timedelta = timedelta(minutes=15)


def lockout_policy(settings: Settings) -> LockoutPolicy:
    """The sign-in lock-out the operator configured."""
    # A limit of 0 would lock everyone out for good; 1 is the strictest that works.
    return LockoutPolicy(
        max_failures_per_name=max(1, settings.signin_max_failures),
        max_failures_per_address=max(1, settings.signin_max_failures_per_address),
        window=timedelta(minutes=max(1, settings.signin_lockout_minutes)),
    )


class SignInLimiter:
    """Counts failed sign-ins in the store and says when a name or address is locked.

    Thread-safe and shared across processes through ``sign_in_failures``;
    ``clock`` is injectable so tests move time instead of sleeping.
    """

    def __init__(
        self,
        store: Store,
        policy: LockoutPolicy | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.policy = policy or LockoutPolicy()
        self.clock = clock

    def _limits(self, name: str, address: str | None) -> list[tuple[str, int, str]]:
        """(key, limit, how the operator log names it) for the name and the address."""
        return [
            (name_key(name), self.policy.max_failures_per_name, f"user name {name[:100]!r}"),
            (
                address_key(address),
                self.policy.max_failures_per_address,
                f"address {address or 'unknown'}",
            ),
        ]

    def retry_after(self, name: str, address: str | None) -> int | None:
        """Seconds until ``name`` from ``address`` may try a password again; None: now."""
        now = self.clock()
        cutoff = now - self.policy.window
        wait = 0.0
        with self.store.session() as session:
            for key, limit, _ in self._limits(name, address):
                recent = session.scalars(
                    select(SignInFailure.failed_at)
                    .where(SignInFailure.key == key, SignInFailure.failed_at > cutoff)
                    .order_by(SignInFailure.failed_at.desc())
                    .limit(limit)
                ).all()
                if len(recent) >= limit:
                    # Unlocked once the limit-th most recent failure leaves the window.
                    clears = recent[-1] + self.policy.window
                    wait = max(wait, (clears - now).total_seconds())
        return max(1, math.ceil(wait)) if wait > 0 else None

    def begin(self, name: str, address: str | None) -> list[int]:
        """Count an attempt as failed until :meth:`succeeded`; the ids of its rows."""
        now = self.clock()
        rows = [SignInFailure(key=key, failed_at=now) for key, _, _ in self._limits(name, address)]
        with self.store.session() as session:
            self._forget_old(session, now)
            session.add_all(rows)
            session.flush()
            return [row.id for row in rows]

    def prune(self) -> int:
        """Delete the failures that left the window (a periodic duty); how many."""
        with self.store.session() as session:
            return self._forget_old(session, self.clock())

    def _forget_old(self, session: Session, now: datetime) -> int:
        # Rows that left the window count for nothing; keep the table small.
        result = session.execute(
            delete(SignInFailure).where(SignInFailure.failed_at <= now - self.policy.window)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    def succeeded(self, attempt: list[int], audit: SignInAudit | None = None) -> None:
        """The password was right: the attempt is no failure (audited with it)."""
        with self.store.session() as session:
            session.execute(delete(SignInFailure).where(SignInFailure.id.in_(attempt)))
            if audit is not None:
                audit.write(session, "signin.ok")

    def failed(self, name: str, address: str | None, audit: SignInAudit | None = None) -> None:
        """The password was wrong (already counted); log and audit a lock-out it starts."""
        cutoff = self.clock() - self.policy.window
        with self.store.session() as session:
            if audit is not None:
                audit.write(session, "signin.failed")
            for key, limit, label in self._limits(name, address):
                count = len(
                    session.scalars(
                        select(SignInFailure.id)
                        .where(SignInFailure.key == key, SignInFailure.failed_at > cutoff)
                        .limit(limit + 1)
                    ).all()
                )
                if count == limit:
                    minutes = round(self.policy.window.total_seconds() / 60)
                    if audit is not None:
                        # Not the label: an unknown user name may be a mistyped password.
                        which = "user name" if key.startswith("name:") else "client address"
                        audit.write(
                            session,
                            "signin.locked",
                            f"the {which} reached {count} failed sign-ins in {minutes} minutes",
                        )
                    operator_log.warning(
                        "sign-in lock-out: %s had %d failed sign-ins within %d minutes "
                        "(last from %s); password sign-ins under it are refused for up to "
                        "%d minutes",
                        label,
                        count,
                        minutes,
                        address or "an unknown address",
                        minutes,
                    )


@dataclass(frozen=True, slots=True)
class SignInAudit:
    """What the audit log says about one password check: whose, how and from where."""

    user_name: str | None  # None for a name that is no user (it may be a mistyped password)
    user_id: int | None
    origin: Origin

    def write(self, session: Session, action: str, detail: str = "") -> None:
        """Record ``action`` about this sign-in in ``session``."""
        if self.user_name is None and not detail:
            detail = "no such user"
        record(
            session,
            action,
            user_name=self.user_name,
            user_id=self.user_id,
            origin=self.origin,
            detail=detail,
        )


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated user."""

    user_id: int
    name: str


class Authenticator:
    """Checks passwords and ``Authorization`` headers against the store (thread-safe)."""

    def __init__(self, store: Store, limiter: SignInLimiter | None = None) -> None:
        self.store = store
        self.limiter = limiter or SignInLimiter(store)
        self._lock = threading.Lock()
        # key (hash of name and password) -> the stored hash it was verified against
        self._verified: OrderedDict[str, str] = OrderedDict()

    def authenticate(self, header: str | None, address: str | None = None) -> Principal | None:
        """The user a header proves to be, or None (missing, malformed or wrong).

        Raises :class:`LockedOut` for Basic credentials while their name or
        the client ``address`` is locked.
        """
        if not header:
            return None
        scheme, _, credentials = header.strip().partition(" ")
        credentials = credentials.strip()
        if scheme.lower() == "basic":
            return self._basic(credentials, address)
        if scheme.lower() == "bearer" and credentials:
            return self._bearer(credentials)
        return None

    def _basic(self, credentials: str, address: str | None) -> Principal | None:
        try:
            decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        name, sep, password = decoded.partition(":")
        if not sep or not name:
            return None
        return self.sign_in(name, password, address)

    def sign_in(
        self, name: str, password: str, address: str | None = None, via: str = "jmap"
    ) -> Principal | None:
        """The user ``name`` if ``password`` is theirs, else None; LockedOut while locked.

        Unknown names and users without a password cost one scrypt check like
        a real one, and count toward the lock-out like a real one. Each checked
        password is audited (``via`` web, jmap or smtp, from ``address``).
        """
        wait = self.limiter.retry_after(name, address)
        if wait is not None:
            raise LockedOut(wait)
        with self.store.session() as session:
            row = session.execute(
                select(User.id, User.name, User.password_hash).where(User.name == name)
            ).first()
        stored = row.password_hash if row is not None else None
        key = hashlib.sha256(f"{name}\0{password}".encode()).hexdigest()
        if row is not None and stored:
            with self._lock:
                known = self._verified.get(key)
            if known is not None and hmac.compare_digest(known, stored):
                return Principal(row.id, row.name)
        attempt = self.limiter.begin(name, address)
        audit = SignInAudit(
            row.name if row is not None else None,
            row.id if row is not None else None,
            Origin.network(via, address),
        )
        if row is None or not stored:
            verify_password(password, _dummy_hash())
            self.limiter.failed(name, address, audit)
            return None
        if not verify_password(password, stored):
            self.limiter.failed(name, address, audit)
            return None
        self.limiter.succeeded(attempt, audit)
        with self._lock:
            self._verified[key] = stored
            self._verified.move_to_end(key)
            while len(self._verified) > _CACHE_SIZE:
                self._verified.popitem(last=False)
        return Principal(row.id, row.name)

    def _bearer(self, token: str) -> Principal | None:
        now = utcnow()
        with self.store.session() as session:
            row = session.execute(
                select(ApiToken.id, ApiToken.last_used_at, User.id.label("user_id"), User.name)
                .join(User, User.id == ApiToken.user_id)
                .where(
                    ApiToken.token_sha256 == token_digest(token),
                    or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > now),
                )
            ).first()
            if row is None:
                return None
            if row.last_used_at is None or now - row.last_used_at > _TOKEN_TOUCH:
                session.execute(
                    update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=now)
                )
        return Principal(row.user_id, row.name)
