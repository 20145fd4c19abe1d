"""The volume benchmark's corpus copies: own ids per copy, threads kept, dates spread."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from mailroom.mime import parse_message

BENCH = Path(__file__).resolve().parents[2] / "bench" / "pg_volume.py"


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pg_volume", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pg_volume"] = module
    spec.loader.exec_module(module)
    return module


def test_blocks_cover_every_message_of_every_user_once() -> None:
    bench = _load_bench()
    blocks = bench.plan(100_003, 10, 446)
    per_user: dict[int, list[tuple[int, int]]] = {}
    for user, _block, start, end in blocks:
        assert 0 < end - start <= bench.BLOCK_COPIES * 446
        per_user.setdefault(user, []).append((start, end))
    assert sum(end - start for _, _, start, end in blocks) == 100_003
    for ranges in per_user.values():
        assert ranges[0][0] == 0
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))


def test_copies_have_their_own_ids_and_keep_their_threads() -> None:
    bench = _load_bench()
    templates = bench.load_corpus()
    low = min(t.epoch for t in templates)
    span = max(t.epoch for t in templates) - low
    parsed = [parse_message(t.raw) for t in templates]
    ids = {p.message_id for p in parsed if p.message_id}
    index, parent = next(
        (i, p.in_reply_to[0])
        for i, p in enumerate(parsed)
        if p.in_reply_to and p.in_reply_to[0] in ids
    )
    parent_index = next(i for i, p in enumerate(parsed) if p.message_id == parent)

    def copy(position: int, user: int, number: int):  # type: ignore[no-untyped-def]
        raw = bench.variant(templates[position], user, number, 200, low, span)
        return parse_message(raw)

    reply, original = copy(index, 0, 7), copy(parent_index, 0, 7)
    assert reply.in_reply_to[0] == original.message_id != parent
    assert copy(index, 0, 8).message_id != reply.message_id
    assert copy(index, 1, 7).message_id != reply.message_id
    first, last = copy(index, 0, 0), copy(index, 0, 199)
    assert first.date is not None and last.date is not None
    assert datetime(2016, 1, 1, tzinfo=UTC) <= first.date < last.date
    assert last.date <= datetime(2026, 1, 1, tzinfo=UTC)
    assert (first.header("received") or "").startswith("by volume.bench.invalid")
