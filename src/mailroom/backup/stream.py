"""AES-256-GCM over a stream in chunks, with order and end authenticated.

The construction is the STREAM scheme of Hoang, Reyhanitabar, Rogaway and
Vizár ("Online authenticated-encryption and its nonce-reuse misuse
resistance", 2015), as `age` and Tink use it: the plaintext is cut into
chunks of ``CHUNK`` bytes; chunk *i* is sealed with the nonce
``prefix(7) || i(4, big-endian) || last(1)`` where ``last`` is 1 only for the
final chunk, and with the file's header as associated data. So a chunk
cannot be moved, dropped, repeated or taken from another file, and a file
cut after any chunk fails at its (now) last chunk, which was not sealed as
last. The key is random per file (wrapped by the backup key in the header),
so nonces never repeat under one key.

On disk each chunk is ``length(4, big-endian) || ciphertext+tag``.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mailroom.errors import MailroomError

CHUNK = 1024 * 1024
PREFIX = 7
TAG = 16
_LENGTH = struct.Struct(">I")
MAX_CHUNKS = 2**32 - 1


class DamagedBackup(MailroomError):
    """The backup file was changed, cut short, or does not belong to this key."""


def _nonce(prefix: bytes, index: int, last: bool) -> bytes:
    if index > MAX_CHUNKS:
        raise ValueError("too many chunks for one backup file")
    return prefix + index.to_bytes(4, "big") + (b"\x01" if last else b"\x00")


class SealingWriter:
    """A write-only binary file that seals what is written, chunk by chunk, into ``out``."""

    def __init__(self, out: BinaryIO, key: bytes, prefix: bytes, associated: bytes) -> None:
        if len(prefix) != PREFIX:
            raise ValueError("the nonce prefix must be 7 bytes")
        self._out = out
        self._aead = AESGCM(key)
        self._prefix = prefix
        self._associated = associated
        self._buffer = bytearray()
        self._index = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        """Take ``data``; full chunks are sealed and written at once."""
        self._buffer += data
        # Keep at least one byte back: the final chunk must be sealed as last, and only
        # close() knows which chunk that is.
        while len(self._buffer) > CHUNK:
            self._seal(bytes(self._buffer[:CHUNK]), last=False)
            del self._buffer[:CHUNK]
        return len(data)

    def _seal(self, chunk: bytes, last: bool) -> None:
        sealed = self._aead.encrypt(
            _nonce(self._prefix, self._index, last), chunk, self._associated
        )
        self._out.write(_LENGTH.pack(len(sealed)) + sealed)
        self._index += 1

    def close(self) -> None:
        """Seal what is left as the last chunk (an empty stream is one empty last chunk)."""
        if not self.closed:
            self._seal(bytes(self._buffer), last=True)
            self._buffer.clear()
            self.closed = True

    def flush(self) -> None:
        """Nothing to do: chunks are written as soon as they are full."""


class OpeningReader:
    """A read-only binary file of the plaintext, checking every chunk as it is read.

    Raises :class:`DamagedBackup` at the first chunk that was changed, moved or
    is missing, and at the end when the file was cut short or continues.
    """

    def __init__(self, source: BinaryIO, key: bytes, prefix: bytes, associated: bytes) -> None:
        self._source = source
        self._aead = AESGCM(key)
        self._prefix = prefix
        self._associated = associated
        self._index = 0
        self._plain = b""
        self._offset = 0
        self._done = False
        self._next = self._record()

    def _record(self) -> bytes | None:
        head = self._source.read(_LENGTH.size)
        if not head:
            return None
        if len(head) < _LENGTH.size:
            raise DamagedBackup("The backup file is cut short (inside a chunk's length).")
        (length,) = _LENGTH.unpack(head)
        if length < TAG or length > CHUNK + TAG:
            raise DamagedBackup("The backup file is damaged (a chunk has an impossible length).")
        body = self._source.read(length)
        if len(body) != length:
            raise DamagedBackup("The backup file is cut short (inside a chunk).")
        return body

    def _advance(self) -> bool:
        """Open the next chunk into the buffer; False at the end of the stream."""
        if self._done:
            return False
        sealed = self._next
        if sealed is None:
            raise DamagedBackup("The backup file is cut short (its last chunk is missing).")
        self._next = self._record()
        last = self._next is None
        try:
            self._plain = self._aead.decrypt(
                _nonce(self._prefix, self._index, last), sealed, self._associated
            )
        except InvalidTag:
            raise DamagedBackup(
                f"The backup file is damaged or was changed (chunk {self._index} does not "
                "verify), or it was cut short or extended."
            ) from None
        self._offset = 0
        self._index += 1
        self._done = last
        return True

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of plaintext (all that is left for a negative size)."""
        parts: list[bytes] = []
        wanted = size if size >= 0 else None
        while wanted is None or wanted > 0:
            if self._offset >= len(self._plain) and not self._advance():
                break
            take = len(self._plain) - self._offset if wanted is None else wanted
            piece = self._plain[self._offset : self._offset + take]
            self._offset += len(piece)
            parts.append(piece)
            if wanted is not None:
                wanted -= len(piece)
        return b"".join(parts)

    def drain(self) -> None:
        """Read (and so check) every chunk left, up to the authenticated end."""
        while self._advance():
            pass
