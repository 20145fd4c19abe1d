"""The chunked AES-GCM stream: chunks cannot be dropped, reordered or moved between files."""

from __future__ import annotations

import io
import os
import struct

import pytest

from mailroom.backup.stream import CHUNK, DamagedBackup, OpeningReader, SealingWriter

KEY = bytes(range(32))
PREFIX = b"\x01" * 7
HEADER = b"header"


def _seal(data: bytes, header: bytes = HEADER) -> bytes:
    out = io.BytesIO()
    writer = SealingWriter(out, KEY, PREFIX, header)
    for start in range(0, len(data), 100_000):  # written in pieces, as tar writes
        writer.write(data[start : start + 100_000])
    writer.close()
    return out.getvalue()


def _records(sealed: bytes) -> list[bytes]:
    records, offset = [], 0
    while offset < len(sealed):
        (length,) = struct.unpack(">I", sealed[offset : offset + 4])
        records.append(sealed[offset : offset + 4 + length])
        offset += 4 + length
    return records


def _open(sealed: bytes, header: bytes = HEADER) -> bytes:
    return OpeningReader(io.BytesIO(sealed), KEY, PREFIX, header).read()


def test_round_trip_of_several_chunks_and_of_nothing() -> None:
    """Data of 3.5 chunks, exactly one chunk, and none come back as written."""
    for size in (CHUNK * 3 + CHUNK // 2, CHUNK, 0):
        data = os.urandom(size)
        assert _open(_seal(data)) == data


def test_a_dropped_last_chunk_a_swap_or_another_header_is_refused() -> None:
    """Cut at a chunk boundary, two chunks swapped, or the header changed: DamagedBackup."""
    sealed = _seal(os.urandom(CHUNK * 3 + 10))
    records = _records(sealed)
    assert len(records) == 4
    with pytest.raises(DamagedBackup, match="chunk 2 does not verify"):
        _open(b"".join(records[:3]))  # the file ends where a chunk ended
    with pytest.raises(DamagedBackup, match="chunk 0 does not verify"):
        _open(b"".join([records[1], records[0], *records[2:]]))
    with pytest.raises(DamagedBackup, match="chunk 0 does not verify"):
        _open(sealed, header=b"HEADER")
