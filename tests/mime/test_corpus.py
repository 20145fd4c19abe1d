"""Optional: parse a whole corpus of real messages (e.g. SpamAssassin) and check invariants.

Skipped unless ``MAILROOM_MIME_CORPUS`` names a directory; every file below it (``*.txt`` or
``*.eml``, recursively) is one raw message. Marked slow: run with
``MAILROOM_MIME_CORPUS=/path/to/corpus pytest -m slow tests/mime``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mailroom.mime import parse_message
from tests.mime.samples import check_invariants


@pytest.mark.slow
def test_every_corpus_message_parses_with_invariants() -> None:
    """Every message of the external corpus parses, without parser fallback, at speed."""
    root = os.environ.get("MAILROOM_MIME_CORPUS")
    if not root:
        pytest.skip("MAILROOM_MIME_CORPUS is not set")
    files = sorted(p for p in Path(root).rglob("*") if p.suffix in (".txt", ".eml"))
    assert files, f"no *.txt or *.eml files under {root}"
    raws = [p.read_bytes() for p in files]
    start = time.perf_counter()
    parsed = [parse_message(raw) for raw in raws]
    rate = len(raws) / (time.perf_counter() - start)
    for path, raw, result in zip(files, raws, parsed, strict=True):
        check_invariants(result, raw)
        assert not any(n.startswith("parser:") for n in result.notes), path
    print(f"\n{len(raws)} messages, {rate:.0f} msgs/s")
