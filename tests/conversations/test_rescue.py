"""Stage 3, the subject rescue: replies without references, and what it must never do."""

from __future__ import annotations

from sqlalchemy import select, text

from mailroom.store.engine import Store
from mailroom.store.models import Account, Change, Message
from tests.factories import make_message
from tests.helpers import ingest, make_account, thread_of

DAY = 24 * 60
ALICE, BOB = "Alice <alice@example.org>", "Bob <bob@example.net>"


def plan(mid: str, **kwargs: object) -> tuple[str, bytes]:
    """A message about "Plan" between Alice and Bob (keyword arguments go to make_message)."""
    options: dict[str, object] = {"subject": "Plan", "sender": ALICE, "to": BOB, **kwargs}
    return mid, make_message(f"{mid}@x", **options)  # type: ignore[arg-type]


def test_reply_without_references_joins_by_subject(store: Store) -> None:
    """A "Re:" naming no parent joins the conversation with that subject and people."""
    account = make_account(store)
    ingest(store, account, [plan("root")])
    ingest(store, account, [plan("reply", subject="RE: Plan", sender=BOB, to=ALICE, minutes=30)])
    assert thread_of(store, "reply@x") == thread_of(store, "root@x")


def test_reply_stored_first_is_adopted_when_its_conversation_arrives(store: Store) -> None:
    """The rescue works backwards too: the earlier-stored reply moves into the new conversation."""
    account = make_account(store)
    ingest(store, account, [plan("reply", subject="AW: Plan", sender=BOB, to=ALICE, minutes=30)])
    ingest(store, account, [plan("root")])
    assert thread_of(store, "reply@x") == thread_of(store, "root@x")
    with store.session() as session:
        destroyed = session.scalars(
            select(Change.object_id).where(Change.type == "Thread", Change.kind == "destroyed")
        ).all()
    assert len(destroyed) == 1


def test_non_reply_never_joins_by_subject(store: Store) -> None:
    """Two notices with one subject, or a fresh "Plan" among a "Plan" conversation, stay apart."""
    account = make_account(store)
    ingest(store, account, [plan("root"), plan("again", minutes=60)])
    shop = {"subject": "Your order has shipped", "sender": "shop@example.com", "to": BOB}
    ingest(store, account, [plan("n1", **shop), plan("n2", minutes=5, **shop)])
    assert thread_of(store, "root@x") != thread_of(store, "again@x")
    assert thread_of(store, "n1@x") != thread_of(store, "n2@x")


def test_rescue_only_within_thirty_days(store: Store) -> None:
    """A reply 29 days after its conversation joins it; one 31 days after starts its own."""
    account = make_account(store)
    ingest(store, account, [plan("root")])
    ingest(store, account, [plan("late", subject="Re: Plan", sender=BOB, minutes=31 * DAY)])
    ingest(store, account, [plan("inside", subject="Re: Plan", sender=BOB, minutes=29 * DAY)])
    assert thread_of(store, "inside@x") == thread_of(store, "root@x")
    assert thread_of(store, "late@x") != thread_of(store, "root@x")


def test_rescue_needs_a_shared_participant_other_than_the_owner(store: Store) -> None:
    """Sharing only the owner's own address is no reason to join: spam "Re:" stays alone."""
    account = make_account(store)
    with store.session() as session:
        row = session.get(Account, account[1])
        assert row is not None
        row.settings = {"email": "me@example.org"}
    me = "Me <me@example.org>"
    ingest(store, account, [plan("root", sender=ALICE, to=me)])
    ingest(store, account, [plan("spam", subject="Re: Plan", sender="x@spam.test", to=me)])
    ingest(store, account, [plan("real", subject="Re: Plan", sender=me, to=ALICE, minutes=9)])
    assert thread_of(store, "spam@x") != thread_of(store, "root@x")
    assert thread_of(store, "real@x") == thread_of(store, "root@x")


def _two_conversations() -> list[tuple[str, bytes]]:
    """Two conversations called "Plan" between Alice and Bob, each threaded by references."""
    return [
        plan("a1"),
        plan("a2", subject="Re: Plan", sender=BOB, to=ALICE, in_reply_to="a1@x", minutes=10),
        plan("b1", minutes=DAY),
        plan("b2", subject="Re: Plan", sender=BOB, to=ALICE, in_reply_to="b1@x", minutes=DAY + 9),
    ]


def test_rescue_never_joins_two_existing_threads(store: Store) -> None:
    """With two candidate conversations the subject cannot tell which: the reply stays alone."""
    account = make_account(store)
    ingest(store, account, _two_conversations())
    ingest(store, account, [plan("r", subject="Re: Plan", sender=ALICE, minutes=2 * DAY)])
    threads = {thread_of(store, f"{m}@x") for m in ("a1", "b1", "r")}
    assert len(threads) == 3
    assert thread_of(store, "a2@x") == thread_of(store, "a1@x")


def test_a_second_candidate_splits_an_attached_reply_back_out(store: Store) -> None:
    """A reply attached while it had one candidate leaves when a second one arrives."""
    account = make_account(store)
    a, b = _two_conversations()[:2], _two_conversations()[2:]
    ingest(store, account, a)
    ingest(store, account, [plan("r", subject="Re: Plan", sender=ALICE, minutes=2 * DAY)])
    assert thread_of(store, "r@x") == thread_of(store, "a1@x")
    ingest(store, account, b)
    assert len({thread_of(store, f"{m}@x") for m in ("a1", "b1", "r")}) == 3
    assert thread_of(store, "a2@x") == thread_of(store, "a1@x")
    with store.session() as session:
        moved = session.scalar(select(Message.id).where(Message.message_id_header == "r@x"))
        updates = session.scalars(
            select(Change.object_id).where(Change.type == "Email", Change.kind == "updated")
        ).all()
    assert moved in updates


def test_candidates_merged_by_references_let_the_reply_join(store: Store) -> None:
    """When the two candidates turn out to be one conversation, the waiting reply joins it."""
    account = make_account(store)
    ingest(store, account, _two_conversations())
    ingest(store, account, [plan("r", subject="Re: Plan", sender=ALICE, minutes=2 * DAY)])
    bridge = plan("m", subject="Minutes", references=["a1@x", "b1@x"], minutes=3 * DAY)
    ingest(store, account, [bridge])
    assert len({thread_of(store, f"{m}@x") for m in ("a1", "b1", "r", "m")}) == 1


def test_a_reply_chain_hanging_by_subject_is_no_second_candidate(store: Store) -> None:
    """A chain started by a reply without references hangs on the conversation, not beside it."""
    account = make_account(store)
    ingest(store, account, _two_conversations()[:2])
    chain = [
        plan("r2", subject="AW: Plan", sender=BOB, to=ALICE, minutes=DAY),
        plan("c2", subject="Re: AW: Plan", in_reply_to="r2@x", minutes=DAY + 1),
    ]
    ingest(store, account, chain)
    ingest(store, account, [plan("r1", subject="Re: Plan", sender=BOB, minutes=2 * DAY)])
    assert len({thread_of(store, f"{m}@x") for m in ("a1", "r2", "c2", "r1")}) == 1


def test_a_chain_rooted_later_leaves_the_conversation_it_hung_on(store: Store) -> None:
    """A reply chain that an answer naming a lost parent roots is no longer moved by subject."""
    account = make_account(store)
    ingest(store, account, _two_conversations()[:2])
    ingest(store, account, [plan("r2", subject="AW: Plan", sender=BOB, minutes=60)])
    assert thread_of(store, "r2@x") == thread_of(store, "a1@x")
    rooting = plan("n", subject="Minutes", references=["lost@x", "r2@x"], minutes=70)
    ingest(store, account, [rooting])
    assert thread_of(store, "r2@x") == thread_of(store, "n@x") != thread_of(store, "a1@x")
    assert thread_of(store, "a2@x") == thread_of(store, "a1@x")


def test_two_rooted_conversations_are_never_joined_through_a_reply(store: Store) -> None:
    """A chain whose replies point at two different conversations joins neither."""
    account = make_account(store)
    early, late = 0, 40 * DAY  # more than the 30-day window apart
    ingest(store, account, [plan("a1", minutes=early), plan("b1", minutes=late)])
    replies = [
        plan("r1", subject="Re: Plan", sender=BOB, minutes=early + 10),  # anchors only a1
        plan("r3", subject="Re: Plan", sender=BOB, minutes=late + 10),  # anchors only b1
        plan("j", subject="Re: Plan", references=["r1@x", "r3@x"], minutes=late + 20),
    ]
    ingest(store, account, replies)
    assert thread_of(store, "r1@x") == thread_of(store, "r3@x") == thread_of(store, "j@x")
    assert len({thread_of(store, f"{m}@x") for m in ("a1", "b1", "r1")}) == 3


def _poison(store: Store) -> None:
    statements = (
        [
            "CREATE TRIGGER poison BEFORE UPDATE OF thread_id ON messages "
            "WHEN NEW.message_id_header = 'poison@x' "
            "BEGIN SELECT RAISE(ABORT, 'poisoned message'); END"
        ]
        if store.dialect == "sqlite"
        else [
            "CREATE FUNCTION poison() RETURNS trigger AS $$ BEGIN "
            "IF NEW.message_id_header = 'poison@x' THEN RAISE EXCEPTION 'poisoned message'; "
            "END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER poison BEFORE UPDATE OF thread_id ON messages "
            "FOR EACH ROW EXECUTE FUNCTION poison()",
        ]
    )
    with store.engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))


def _cure(store: Store) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "DROP TRIGGER IF EXISTS poison"
                + ("" if store.dialect == "sqlite" else " ON messages")
            )
        )
        if store.dialect != "sqlite":
            conn.execute(text("DROP FUNCTION IF EXISTS poison()"))


def test_threading_failure_is_noted_on_the_message_and_the_batch_stores(store: Store) -> None:
    """A message the database refuses to thread keeps a note; the rest of its batch is threaded."""
    account = make_account(store)
    _poison(store)
    try:
        result = ingest(
            store,
            account,
            [
                plan("root"),
                plan("poison", subject="Re: Plan", in_reply_to="root@x", minutes=1),
                plan("next", subject="Re: Plan", in_reply_to="root@x", minutes=2),
            ],
        )
    finally:
        _cure(store)
    assert len(result.created_ids) == 3
    with store.session() as session:
        rows = {
            mid: (thread, note)
            for mid, thread, note in session.execute(
                select(Message.message_id_header, Message.thread_id, Message.thread_note)
            )
        }
    assert rows["poison@x"][0] is None and "poisoned message" in (rows["poison@x"][1] or "")
    assert rows["next@x"][0] == rows["root@x"][0] is not None
    assert rows["next@x"][1] is None
