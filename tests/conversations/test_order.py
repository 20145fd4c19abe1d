"""The partition into threads does not depend on arrival order or batch boundaries."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mailroom.store.engine import Store
from tests.conversations.conftest import Corpus, ingest_in_batches, partition, shuffled

PROPERTY = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def test_order_corpus_exercises_references_and_the_subject_rescue(
    order_corpus: Corpus, order_corpus_partition: set[frozenset[str]]
) -> None:
    """The property's corpus has real reference threads and every rescue case, as expected."""
    assert len(order_corpus) >= 60
    groups = {pid: group for group in order_corpus_partition for pid in group}
    assert groups["r1"] == groups["p1"] == groups["q1"] == groups["m1"]  # bridged candidates
    assert groups["r2"] == groups["c2"] == groups["p1"]  # a reply with its own answer
    assert groups["s2"] == groups["s1"]  # one candidate
    assert groups["s3"] == {"s3"} and groups["l2"] == {"l2"}  # nobody shared, too late
    real = [g for g in order_corpus_partition if len(g) > 2 and not any(len(p) < 5 for p in g)]
    assert len(real) >= 3, "the sample corpus should bring real multi-message conversations"


@PROPERTY
@given(
    seed=st.integers(min_value=0, max_value=10**9),
    cuts=st.lists(st.integers(min_value=1, max_value=80), max_size=12),
)
def test_real_threads_any_order_any_batches(
    order_corpus: Corpus,
    order_corpus_partition: set[frozenset[str]],
    fresh_store: Callable[[], Store],
    seed: int,
    cuts: list[int],
) -> None:
    """Real sample conversations and the rescue cases, shuffled and split anyhow: one partition."""
    store = fresh_store()
    ingest_in_batches(store, shuffled(order_corpus, seed), cuts)
    assert partition(store) == order_corpus_partition


@pytest.mark.slow
def test_whole_sample_corpus_five_random_orders(
    demo_corpus: Corpus, fresh_store: Callable[[], Store]
) -> None:
    """The whole sample Maildir in five random orders and batch sizes gives one partition."""
    reference = fresh_store()
    ingest_in_batches(reference, demo_corpus, list(range(50, len(demo_corpus), 50)))
    expected = partition(reference)
    for seed, size in [(1, 7), (2, 33), (3, 100), (4, 250), (5, 446)]:
        store = fresh_store()
        ingest_in_batches(store, shuffled(demo_corpus, seed), list(range(size, 446, size)))
        assert partition(store) == expected, f"order {seed} (batches of {size}) differs"


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(min_value=0, max_value=10**9),
    cuts=st.lists(st.integers(min_value=1, max_value=445), max_size=12),
)
def test_whole_sample_corpus_any_order_any_batches(
    demo_corpus: Corpus, fresh_store: Callable[[], Store], seed: int, cuts: list[int]
) -> None:
    """The whole sample Maildir, shuffled and split anyhow, gives one partition."""
    reference = fresh_store()
    ingest_in_batches(reference, demo_corpus, [])
    store = fresh_store()
    ingest_in_batches(store, shuffled(demo_corpus, seed), cuts)
    assert partition(store) == partition(reference)
