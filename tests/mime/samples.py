"""Hand-made sample messages shared by the mime tests (files in data/ plus builders)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def sample(name: str) -> bytes:
    """The bytes of ``data/<name>.eml``."""
    return (DATA / f"{name}.eml").read_bytes()


def all_samples() -> list[bytes]:
    """Every sample message in ``data/``, in name order."""
    return [p.read_bytes() for p in sorted(DATA.glob("*.eml"))]


def message(headers: str, body: bytes | str = b"Hello.\n", *, crlf: bool = False) -> bytes:
    """Build raw message bytes from a header block (text) and a body."""
    head = headers.strip("\n").encode("utf-8", "surrogateescape")
    raw_body = body.encode("utf-8") if isinstance(body, str) else body
    raw = head + b"\n\n" + raw_body
    return raw.replace(b"\n", b"\r\n") if crlf else raw
