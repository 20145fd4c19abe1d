"""Fixtures for threading tests: real conversations from the sample corpus, fresh stores."""

from __future__ import annotations

import random
import shutil
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.conversations.references import reference_chain
from mailroom.conversations.subject import split_subject
from mailroom.mime import parse_message
from mailroom.providers.local import open_source
from mailroom.store.engine import Store, open_store
from mailroom.store.models import Message
from tests.conftest import SAMPLES
from tests.factories import make_message
from tests.helpers import ingest, make_account

Corpus = list[tuple[str, bytes]]


def partition(store: Store) -> set[frozenset[str]]:
    """The threads of the store as sets of provider ids."""
    with store.session() as session:
        rows = session.execute(select(Message.provider_id, Message.thread_id)).all()
    groups: dict[int | None, set[str]] = defaultdict(set)
    for provider_id, thread_id in rows:
        groups[thread_id].add(provider_id)
    return {frozenset(group) for group in groups.values()}


def ingest_in_batches(store: Store, items: Corpus, cuts: Sequence[int]) -> None:
    """Ingest ``items`` (in the given order) as batches split at the given positions."""
    account = make_account(store)
    start = 0
    for end in [*sorted(set(cuts)), len(items)]:
        if items[start:end]:
            ingest(store, account, items[start:end])
        start = max(start, end)


def shuffled(items: Corpus, seed: int) -> Corpus:
    """A copy of ``items`` in a seeded random order."""
    copy = list(items)
    random.Random(seed).shuffle(copy)
    return copy


@pytest.fixture(scope="session")
def demo_corpus() -> Corpus:
    """Every message of the shipped sample Maildir as (provider id, raw bytes)."""
    return [(m.provider_id, m.raw) for m in open_source(SAMPLES).messages() if m.raw]


@pytest.fixture(scope="session")
def demo_threads(demo_corpus: Corpus) -> Corpus:
    """Real conversations from the sample corpus, about 70 messages.

    The subject groups that hold a reply without references (what the subject
    rescue works on), smallest first, and two big groups threaded by references.
    """
    groups: dict[str, list[tuple[str, bytes]]] = defaultdict(list)
    rescue: set[str] = set()
    for provider_id, raw in demo_corpus:
        parsed = parse_message(raw)
        reply, core = split_subject(parsed.subject)
        groups[core.casefold()].append((provider_id, raw))
        if reply and not reference_chain(parsed):
            rescue.add(core.casefold())
    # Small groups first: the fewer messages a reply can meet, the more its arrival order matters.
    chosen = sorted((k for k in rescue if len(groups[k]) > 1), key=lambda k: (len(groups[k]), k))
    by_size = sorted((k for k in groups if k not in rescue), key=lambda k: (-len(groups[k]), k))
    chosen += [k for k in by_size if len(groups[k]) > 3][:2]
    picked: Corpus = []
    for key in chosen:
        if len(picked) + len(groups[key]) <= 75:
            picked += groups[key]
    return picked


DAY = 24 * 60


def rescue_scenarios() -> Corpus:
    """Hand-made conversations for the subject rescue's hard cases.

    The sample corpus has replies without references, but none whose
    conversation is only found by subject, so these supply the cases where
    arrival order could matter: a reply with one candidate (s2 → s1), two
    candidates that a later message with another subject bridges (r1 → p* +
    q* via m1), a reply sharing nobody (s3), one outside the window (l2), and
    a reply whose own answer carries references (r2 ← c2, which is no
    candidate of its own for r1).
    """
    alice, bob = "Alice <alice@example.org>", "Bob <bob@example.net>"
    carol, dan = "carol@example.org", "dan@example.net"

    def msg(mid: str, subject: str, sender: str, to: str, minutes: int, **kw: object) -> bytes:
        return make_message(f"{mid}@rescue", subject=subject, sender=sender, to=to,
                            minutes=minutes, **kw)  # type: ignore[arg-type]  # fmt: skip

    return [
        ("p1", msg("p1", "Plan", alice, bob, 0)),
        ("p2", msg("p2", "Re: Plan", bob, alice, 10, in_reply_to="p1@rescue")),
        ("q1", msg("q1", "Plan", alice, bob, DAY)),
        ("q2", msg("q2", "Re: Plan", bob, alice, DAY + 5, in_reply_to="q1@rescue")),
        ("r1", msg("r1", "RE: Plan", alice, bob, 2 * DAY)),
        ("m1", msg("m1", "Minutes", bob, alice, 3 * DAY, references=["p1@rescue", "q1@rescue"])),
        ("r2", msg("r2", "AW: Plan", bob, alice, 3 * DAY + 1)),
        ("c2", msg("c2", "Re: AW: Plan", alice, bob, 3 * DAY + 2, in_reply_to="r2@rescue")),
        ("s1", msg("s1", "Budget", carol, dan, 0)),
        ("s2", msg("s2", "AW: Budget", dan, carol, 60)),
        ("s3", msg("s3", "Re: Budget", "eve@spam.test", "mallory@x.test", 70)),
        ("l1", msg("l1", "Lunch", carol, dan, 0)),
        ("l2", msg("l2", "Re: Lunch", dan, carol, 31 * DAY)),
    ]


@pytest.fixture(scope="session")
def order_corpus(demo_threads: Corpus) -> Corpus:
    """Real sample conversations plus the rescue scenarios: what the order property uses."""
    return [*demo_threads, *rescue_scenarios()]


@pytest.fixture(scope="session")
def order_corpus_partition(
    order_corpus: Corpus, sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> set[frozenset[str]]:
    """The threads of ``order_corpus`` ingested in the given order, one batch."""
    path = tmp_path_factory.mktemp("reference") / "store.sqlite3"
    shutil.copy(sqlite_template, path)
    store = open_store(f"sqlite:///{path}", migrate=False)
    try:
        ingest_in_batches(store, order_corpus, [])
        return partition(store)
    finally:
        store.dispose()


@pytest.fixture
def fresh_store(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[], Store]]:
    """A factory of empty migrated SQLite stores (for property tests with many examples)."""
    opened: list[Store] = []

    def make() -> Store:
        path = tmp_path_factory.mktemp("store") / f"{uuid.uuid4().hex}.sqlite3"
        shutil.copy(sqlite_template, path)
        store = open_store(f"sqlite:///{path}", migrate=False)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.dispose()
