"""``FieldCipher``: encrypting one value of one row and column under its owner's data key.

A value is sealed with AES-256-GCM under the owner's current data key, with
a fresh 12-byte nonce per value and associated data naming the table, the
column, the row id, the owner and the key version: a value copied onto
another row, column or owner does not decrypt, and a changed byte is
refused. Sealed form: ``b"f1" + version (4 bytes, big-endian) + nonce +
ciphertext+tag``, so each value says which key version opens it (both
versions work while an owner key rotation runs). Text columns hold the same
bytes as ``mrf1.`` + URL-safe base64.

A value of :data:`COMPRESS_FROM` bytes or more (a body, a header list, raw
message bytes) is compressed (Zstandard, level 1) before it is sealed, when
that makes it smaller: its form then starts ``b"z1"`` instead, and the
associated data says so too (a changed prefix does not open). Mail shrinks to
about 40 % this way, so a sealed store is smaller than a clear one and an
import writes less. What the
stored length tells about the value is then how well it compresses; its clear
size is stored beside it anyway (``messages.size``, ``blobs.size``), and the
value is one message's own text, never mixed with another's.

``lookup_hash`` is a keyed HMAC-SHA256 of a value (a Message-ID, an address,
a search token) under a key derived from the owner's data key: equal values
of one owner give equal hashes, so look-ups, threading and dedup can match
without the value, while nobody without the key can test a guess.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets as _random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import zstandard
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mailroom.crypto.datakey import DataKey
from mailroom.crypto.keyed_hash import KeyedHash
from mailroom.errors import ConfigError

if TYPE_CHECKING:
    from mailroom.crypto.datakeys import OwnerKeys

PREFIX = b"f1"
COMPRESSED_PREFIX = b"z1"  # the value was compressed before it was sealed
TEXT_PREFIX = "mrf1."
COMPRESS_FROM = 512  # bytes: smaller values are sealed as they are
# Zstandard's level 1: 2.45x on the benchmark corpus's mail, what zlib's fastest level gives,
# at 3x its speed (130 MB/s here); level 3 saves 2 % more for a quarter more time.
_COMPRESS_LEVEL = 1
_COMPRESSED_CONTEXT = b":zstd"
_HEAD = len(PREFIX) + 4
_NONCE = 12
# A sealed value's bytes up to the end of its random nonce: a new one for every sealing.
NONCE_END = _HEAD + _NONCE


class FieldTampered(ConfigError):
    """A sealed value does not open: changed, moved to another row or column, or damaged."""


def field_context(owner: int, table: str, column: str, row_id: int | str, version: int) -> bytes:
    """The associated data binding a value to its owner, table, column, row and key version."""
    return f"field:{table}:{column}:{row_id}:owner:{owner}:key:{version}".encode()


def version_of(token: bytes) -> int:
    """The owner key version a sealed value needs; FieldTampered when it is no sealed value."""
    if not token.startswith((PREFIX, COMPRESSED_PREFIX)) or len(token) < _HEAD + _NONCE + 16:
        raise FieldTampered("A stored encrypted value is damaged (it is not a sealed value).")
    return int.from_bytes(token[len(PREFIX) : _HEAD], "big")


def to_text(token: bytes) -> str:
    """A sealed value as text for a text column."""
    return TEXT_PREFIX + base64.urlsafe_b64encode(token).decode("ascii")


def from_text(text: str) -> bytes:
    """The sealed value back from :func:`to_text`'s form; FieldTampered otherwise."""
    if not text.startswith(TEXT_PREFIX):
        raise FieldTampered("A stored encrypted value is damaged (no mrf1. prefix).")
    try:
        return base64.urlsafe_b64decode(text[len(TEXT_PREFIX) :].encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise FieldTampered("A stored encrypted value is damaged (not base64).") from None


def _lookup_key(data_key: DataKey, kind: str) -> bytes:
    # A key of its own per purpose: a lookup hash never reveals anything about the data key.
    return HKDF(
        algorithm=hashes.SHA256(),
        length=32,
        salt=None,
        info=b"mailroom lookup v1:" + kind.encode(),
    ).derive(data_key.key)


Sealer = Callable[[str, str, "int | str", "bytes | str"], bytes]  # table, column, row id, value

_NONCE_BLOCK = 512  # nonces per call of os.urandom


class _Nonces:
    """Fresh random 12-byte nonces, sliced from one ``os.urandom`` block per 512.

    A call of ``os.urandom`` per value cost a sixth of sealing it. The blocks are
    per thread (two threads never slice the same block) and are dropped in a forked
    child, which would otherwise hand out its parent's remaining nonces again.
    """

    def __init__(self) -> None:
        self._local = threading.local()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._local = threading.local()

    def next(self) -> bytes:
        local = self._local
        block: bytes | None = getattr(local, "block", None)
        at: int = getattr(local, "at", 0)
        if block is None or at >= len(block):
            block = local.block = _random.token_bytes(_NONCE * _NONCE_BLOCK)
            at = 0
        local.at = at + _NONCE
        return block[at : at + _NONCE]


_nonces = _Nonces()


_compressors = threading.local()


def _compressor() -> Callable[[bytes], bytes]:
    """This thread's Zstandard compressor: one is not thread-safe, and making one per sealer
    cost more than sealing a short value (writers seal single values one by one)."""
    compress: Callable[[bytes], bytes] | None = getattr(_compressors, "compress", None)
    if compress is None:
        compress = _compressors.compress = zstandard.ZstdCompressor(level=_COMPRESS_LEVEL).compress
    return compress


def key_sealer(key: DataKey, aead: AESGCM | None = None) -> Sealer:
    """Sealing under one data key (``aead``: its cipher object, when the caller keeps one).

    :meth:`FieldCipher.sealer` in the writer, and a sealing helper process
    (``crypto.seal_lane``) that was handed the key, give the same sealed form.
    """
    aead = aead or AESGCM(key.key)
    version = key.version.to_bytes(4, "big")
    head, compressed_head = PREFIX + version, COMPRESSED_PREFIX + version
    tail = f":owner:{key.owner}:key:{key.version}"
    nonces = _nonces
    compress = _compressor()

    def seal(table: str, column: str, row_id: int | str, value: bytes | str) -> bytes:
        plain = value.encode("utf-8") if isinstance(value, str) else value
        nonce = nonces.next()
        context = f"field:{table}:{column}:{row_id}{tail}".encode()
        if len(plain) >= COMPRESS_FROM:
            compressed = compress(plain)
            if len(compressed) < len(plain):
                sealed = aead.encrypt(nonce, compressed, context + _COMPRESSED_CONTEXT)
                return compressed_head + nonce + sealed
        return head + nonce + aead.encrypt(nonce, plain, context)

    return seal


class FieldCipher:
    """Encrypts and decrypts field values and makes lookup hashes for owners."""

    def __init__(self, keys: OwnerKeys) -> None:
        self.keys = keys
        # Derived lookup keys per (owner, version, kind): HKDF per hash would cost more than
        # the HMAC itself when a message's addresses and references are hashed one by one.
        self._lookup_keys: dict[tuple[int, int, str], bytes] = {}
        self._aeads: dict[tuple[int, int], AESGCM] = {}  # one cipher object per key
        self._keyed_hashes: dict[tuple[int, int, str], KeyedHash] = {}
        # Lookup hashes made in this unit of work: a batch hashes each Message-ID when it
        # stores it, then again when it threads (every version) and rescues.
        self._hashed: dict[tuple[int, int, str, str], str] = {}

    def encrypt(
        self, owner: int, table: str, column: str, row_id: int | str, value: bytes | str
    ) -> bytes:
        """Seal ``value`` of ``table.column`` of row ``row_id`` under the owner's current key."""
        return self.sealer(owner)(table, column, row_id, value)

    def sealer(self, owner: int) -> Sealer:
        """:meth:`encrypt` for many values of ``owner``: the current key is looked up once.

        For a batch of new mail (tens of thousands of values), where finding the key
        and its cipher per value cost about as much as the AES itself. The sealed form
        and associated data are :meth:`encrypt`'s (:func:`field_context`), byte for byte.
        """
        key = self.keys.current(owner)
        return key_sealer(key, self._aead(key))

    def decrypt(
        self, owner: int, table: str, column: str, row_id: int | str, token: bytes
    ) -> bytes:
        """Open a sealed value; FieldTampered if it was changed or belongs elsewhere."""
        version = version_of(token)
        key = self.keys.version(owner, version)
        context = field_context(owner, table, column, row_id, version)
        compressed = token.startswith(COMPRESSED_PREFIX)
        try:
            plain = self._aead(key).decrypt(
                token[_HEAD : _HEAD + _NONCE],
                token[_HEAD + _NONCE :],
                context + _COMPRESSED_CONTEXT if compressed else context,
            )
            return zstandard.decompress(plain) if compressed else plain
        except InvalidTag:
            raise FieldTampered(
                f"An encrypted value of {table}.{column} (row {row_id}) does not open: it was "
                "changed, or copied from another row, column or owner."
            ) from None

    def decrypt_text(
        self, owner: int, table: str, column: str, row_id: int | str, token: bytes
    ) -> str:
        """:meth:`decrypt` for a value that was text."""
        return self.decrypt(owner, table, column, row_id, token).decode("utf-8")

    def lookup_hash(self, owner: int, kind: str, value: str) -> str:
        """The keyed hash (64 hex digits) of ``value`` under the owner's current key, per ``kind``.

        Callers normalize first (a Message-ID without brackets, an address lower-cased):
        the hash matches byte-equal values only.
        """
        return self._hash(self.keys.current(owner), kind, value)

    def lookup_hasher(self, owner: int, kind: str) -> Callable[[str], bytes]:
        """The raw 32-byte :meth:`lookup_hash` of many values of one owner and kind.

        The blind search index hashes every word of a message: per call, finding the
        key and keying the HMAC cost more than the hash.
        """
        return self._keyed(self.keys.current(owner), kind).digest

    def lookup_key(self, key: DataKey, kind: str) -> bytes:
        """The HMAC key that :meth:`lookup_hash` of ``kind`` uses under ``key`` (derived).

        For a parse worker that hashes words itself (``crypto.blind_tokens``): it gets this
        purpose's key only, never the data key.
        """
        slot = (key.owner, key.version, kind)
        derived = self._lookup_keys.get(slot)
        if derived is None:
            derived = self._lookup_keys[slot] = _lookup_key(key, kind)
        return derived

    def lookup_hashes(self, owner: int, kind: str, value: str) -> list[str]:
        """The hash of ``value`` under every stored key version (newest first), for look-ups.

        While an owner key rotation runs, rows still carry hashes of the old version.
        """
        versions = sorted(self.keys.versions(owner), reverse=True) or [
            self.keys.current(owner).version
        ]
        return [self._hash(self.keys.version(owner, v), kind, value) for v in versions]

    def _aead(self, key: DataKey) -> AESGCM:
        slot = (key.owner, key.version)
        aead = self._aeads.get(slot)
        if aead is None:
            aead = self._aeads[slot] = AESGCM(key.key)
        return aead

    def _keyed(self, key: DataKey, kind: str) -> KeyedHash:
        slot = (key.owner, key.version, kind)
        keyed = self._keyed_hashes.get(slot)
        if keyed is None:
            keyed = self._keyed_hashes[slot] = KeyedHash(self.lookup_key(key, kind))
        return keyed

    def _hash(self, key: DataKey, kind: str, value: str) -> str:
        slot = (key.owner, key.version, kind, value)
        found = self._hashed.get(slot)
        if found is None:
            found = self._hashed[slot] = self._keyed(key, kind).hexdigest(value)
        return found
