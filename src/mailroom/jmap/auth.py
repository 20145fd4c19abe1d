"""Who is asking: passwords, API tokens, and the HTTP ``Authorization`` header.

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
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.errors import ConfigError
from mailroom.owners import get_or_create_user, get_user
from mailroom.store.engine import Store
from mailroom.store.models import ApiToken, User, utcnow

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


def set_password(session: Session, name: str, password: str) -> bool:
    """Set the password of user ``name``, creating the user; True if the user is new."""
    if not password:
        raise ConfigError("The password is empty; give a password of at least one character.")
    existed = session.scalar(select(User.id).where(User.name == name)) is not None
    user = get_or_create_user(session, name)
    user.password_hash = hash_password(password)
    return not existed


def create_token(session: Session, user_name: str, name: str = "") -> str:
    """A new API token of an existing user; the token itself is shown only here."""
    user = get_user(session, user_name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(user_id=user.id, token_sha256=token_digest(token), name=name[:200]))
    return token


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated user."""

    user_id: int
    name: str


class Authenticator:
    """Checks ``Authorization`` headers against the store (thread-safe)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        # key (hash of name and password) -> the stored hash it was verified against
        self._verified: OrderedDict[str, str] = OrderedDict()

    def authenticate(self, header: str | None) -> Principal | None:
        """The user a header proves to be, or None (missing, malformed or wrong)."""
        if not header:
            return None
        scheme, _, credentials = header.strip().partition(" ")
        credentials = credentials.strip()
        if scheme.lower() == "basic":
            return self._basic(credentials)
        if scheme.lower() == "bearer" and credentials:
            return self._bearer(credentials)
        return None

    def _basic(self, credentials: str) -> Principal | None:
        try:
            decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        name, sep, password = decoded.partition(":")
        if not sep or not name:
            return None
        with self.store.session() as session:
            row = session.execute(
                select(User.id, User.name, User.password_hash).where(User.name == name)
            ).first()
        if row is None or not row.password_hash:
            return None
        key = hashlib.sha256(f"{name}\0{password}".encode()).hexdigest()
        with self._lock:
            known = self._verified.get(key)
        if known is not None and hmac.compare_digest(known, row.password_hash):
            return Principal(row.id, row.name)
        if not verify_password(password, row.password_hash):
            return None
        with self._lock:
            self._verified[key] = row.password_hash
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
                .where(ApiToken.token_sha256 == token_digest(token))
            ).first()
            if row is None:
                return None
            if row.last_used_at is None or now - row.last_used_at > _TOKEN_TOUCH:
                session.execute(
                    update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=now)
                )
        return Principal(row.user_id, row.name)
