"""fewer_collections: rarer cyclic collection inside, the old settings back outside."""

from __future__ import annotations

import gc
import weakref

from mailroom.ingest.collector import THRESHOLD, fewer_collections


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_settings_are_restored_after_nested_use() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold()[0] == THRESHOLD
        assert gc.get_freeze_count() > 0
        with fewer_collections():
            assert gc.get_threshold()[0] == THRESHOLD
        assert gc.get_threshold()[0] == THRESHOLD  # the outer user still runs
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_made_inside_are_freed_after() -> None:
    with fewer_collections():
        ref = weakref.ref(_Node())
    gc.collect()
    assert ref() is None


def test_settings_are_restored_when_the_block_raises() -> None:
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
