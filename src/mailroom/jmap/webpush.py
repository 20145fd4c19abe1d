"""Message Encryption for Web Push (RFC 8291) with the ``aes128gcm`` coding (RFC 8188).

A push subscription that gives ``keys`` (the user agent's P-256 public key
``p256dh`` and its 16-byte ``auth`` secret, both base64url) gets every
payload encrypted: an ephemeral server key pair and the user agent's key
agree on a secret (ECDH), which with ``auth`` and a random salt derives the
content key and nonce (HKDF-SHA-256). The body is one record:

    salt (16) | record size (4) | key id length (1) = 65 | server public key (65) | ciphertext

The plaintext ends with the last-record delimiter 0x02 and no padding.
"""

from __future__ import annotations

import base64
import os
import struct
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

RECORD_SIZE = 4096
_KEY_INFO = b"WebPush: info\x00"
_CEK_INFO = b"Content-Encoding: aes128gcm\x00"
_NONCE_INFO = b"Content-Encoding: nonce\x00"


class BadKeys(ValueError):
    """The ``keys`` of a subscription are not a P-256 point and a 16-byte secret."""


def b64url_decode(text: str) -> bytes:
    """Decode base64url with or without padding; ValueError if it is not."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class UserAgentKeys:
    """The receiving side's public key and authentication secret."""

    public: ec.EllipticCurvePublicKey
    public_bytes: bytes
    auth: bytes

    @classmethod
    def parse(cls, p256dh: object, auth: object) -> UserAgentKeys:
        """Check and decode the two base64url values; :class:`BadKeys` if they are wrong."""
        if not isinstance(p256dh, str) or not isinstance(auth, str):
            raise BadKeys("p256dh and auth must be base64url strings.")
        try:
            raw_key, secret = b64url_decode(p256dh), b64url_decode(auth)
            public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw_key)
        except ValueError:
            raise BadKeys("p256dh is not an uncompressed P-256 public key (base64url).") from None
        if len(raw_key) != 65 or len(secret) != 16:
            raise BadKeys("p256dh must be 65 octets and auth 16 octets (base64url).")
        return cls(public, raw_key, secret)


def _hmac(key: bytes, data: bytes) -> bytes:
    mac = hmac.HMAC(key, hashes.SHA256())
    mac.update(data)
    return mac.finalize()


def _hkdf(salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    """HKDF-SHA-256 (RFC 5869) with one expand block (length <= 32)."""
    return _hmac(_hmac(salt, ikm), info + b"\x01")[:length]


def encrypt(
    plaintext: bytes,
    keys: UserAgentKeys,
    *,
    server_key: ec.EllipticCurvePrivateKey | None = None,
    salt: bytes | None = None,
) -> bytes:
    """The ``aes128gcm`` body for ``plaintext`` (fresh key and salt unless given, for tests)."""
    server_key = server_key or ec.generate_private_key(ec.SECP256R1())
    salt = salt if salt is not None else os.urandom(16)
    server_public = server_key.public_key().public_bytes(
        Encoding.X962, PublicFormat.UncompressedPoint
    )
    shared = server_key.exchange(ec.ECDH(), keys.public)
    ikm = _hkdf(keys.auth, shared, _KEY_INFO + keys.public_bytes + server_public, 32)
    cek = _hkdf(salt, ikm, _CEK_INFO, 16)
    nonce = _hkdf(salt, ikm, _NONCE_INFO, 12)
    ciphertext = AESGCM(cek).encrypt(nonce, plaintext + b"\x02", None)
    record_size = max(RECORD_SIZE, len(ciphertext) + 1)
    header = salt + struct.pack("!IB", record_size, len(server_public)) + server_public
    return header + ciphertext
