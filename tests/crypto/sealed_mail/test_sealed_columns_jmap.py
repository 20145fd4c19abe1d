"""JMAP over sealed ``messages`` columns answers exactly as over the same mail kept clear.

One store, two owners with the same mail: ``clear`` ingested with sealing off,
``sealed`` with it on. Every Email/query filter on addresses and subject, every
text sort, and Email/get's header-derived properties must give the same answer
(ids mapped back to the mail they stand for), and never ciphertext.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from mailroom.crypto.sealing import MailSealing
from mailroom.store.engine import Store
from mailroom.store.models import Message
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, Server, email_id, run_server, seed

MAIL = [
    ("a", dict(subject="Quarterly hangar forecast", sender="Zoë Ärger <zoe@example.org>")),
    ("b", dict(subject="Re: Quarterly hangar forecast", sender="bob@example.net", minutes=3)),
    ("c", dict(subject="[list] Lunch plans", to="Carol <carol@example.com>, dan@example.com")),
    ("d", dict(subject="FWD: lunch PLANS", sender="Yves <yves@EXAMPLE.org>", minutes=7)),
    ("e", dict(subject="", sender="alice@example.org", to="Émile <emile@example.fr>")),
    ("f", dict(subject="Hangar keys", sender='"Quoted, Name" <q@example.org>', minutes=9)),
]
FILTERS: list[dict[str, Any]] = [
    {"subject": "hangar"},
    {"subject": "HANGAR forecast"},
    {"subject": "lunch"},
    {"subject": "nothing like it"},
    {"from": "example.org"},
    {"from": "zoë"},
    {"from": "ärger"},
    {"from": "<bob"},
    {"from": "quoted, name"},
    {"to": "carol"},
    {"to": "dan@example.com"},
    {"to": "émile"},
    {"to": "bob@example.net"},
    {"cc": "anyone"},
    {"bcc": "x"},
    {"operator": "NOT", "conditions": [{"subject": "hangar"}]},
    {"operator": "OR", "conditions": [{"from": "yves"}, {"to": "carol"}]},
    {"operator": "AND", "conditions": [{"subject": "hangar"}, {"after": "2000-01-01T00:00:00Z"}]},
    {"subject": "lunch", "from": "yves"},
    # sealed rows are matched among the rows the AND-ed conditions allow: every shape
    {"subject": "hangar", "before": "2024-03-01T09:04:00Z"},
    {
        "operator": "AND",
        "conditions": [
            {"operator": "NOT", "conditions": [{"subject": "hangar"}]},
            {"before": "2024-03-01T09:08:00Z"},
        ],
    },
    {
        "operator": "NOT",
        "conditions": [
            {
                "operator": "AND",
                "conditions": [{"subject": "hangar"}, {"before": "2024-03-01T09:04:00Z"}],
            }
        ],
    },
    {
        "operator": "AND",
        "conditions": [
            {"operator": "OR", "conditions": [{"from": "bob"}, {"subject": "keys"}]},
            {"minSize": 1},
            {"operator": "NOT", "conditions": [{"to": "carol"}]},
            {"after": "2024-03-01T09:02:00Z"},
        ],
    },
    {"text": "hangar", "from": "example"},
    {"body": "there", "subject": "plans"},
]
SORTS: list[list[dict[str, Any]]] = [
    [{"property": "subject"}],
    [{"property": "subject", "isAscending": False}],
    [{"property": "from"}],
    [{"property": "from", "isAscending": False}, {"property": "receivedAt"}],
    [{"property": "to"}],
    [{"property": "to", "collation": "i;octet"}],
    [{"property": "subject", "collation": "i;unicode-casemap"}, {"property": "from"}],
]
GOT = ["subject", "from", "to", "cc", "replyTo", "preview", "messageId", "inReplyTo", "sentAt"]


def _owner(store: Store, name: str, sealing: MailSealing | None) -> tuple[Person, dict[int, str]]:
    """``name`` with the same mail as every other owner, sealed or clear."""
    store.sealing = sealing
    person = seed(store, name, prefix=f"{name}-")
    raws = [(f"{name}-{key}", make_message(f"{key}@same", **args)) for key, args in MAIL]
    ingest(store, (person.user_id, person.account_id, person.inbox), raws)
    with store.session() as session:
        rows = session.execute(
            select(Message.id, Message.provider_id).where(Message.user_id == person.user_id)
        ).all()
    return person, {mid: provider.removeprefix(f"{name}-") for mid, provider in rows}


@pytest.fixture
def owners(store: Store, sealing: MailSealing) -> Iterator[tuple[Server, list[Any]]]:
    """(server, [(clear person, names), (sealed person, names)]) over one store."""
    clear = _owner(store, "clear", None)
    sealed = _owner(store, "sealed", sealing)
    with store.session() as session:
        flags = dict(session.execute(select(Message.user_id, Message.sealed)).all())
    assert flags == {clear[0].user_id: False, sealed[0].user_id: True}
    for server in run_server(store):
        yield server, [clear, sealed]


def _answers(server: Server, person: Person, names: dict[int, str]) -> list[Any]:
    answers: list[Any] = []
    with Jmap(server, person) as client:

        def query(args: dict[str, Any]) -> list[str]:
            found = client.call("Email/query", args)
            assert "error" not in found, found
            return [names[int(value[1:])] for value in found["ids"]]

        for condition in FILTERS:
            answers.append(query({"filter": condition, "calculateTotal": True}))
        for sort in SORTS:
            answers.append(query({"sort": sort}))
            answers.append(query({"sort": sort, "collapseThreads": True, "limit": 3}))
            answers.append(query({"sort": sort, "filter": {"from": "example"}}))
        same = [mid for mid, name in names.items() if name in dict(MAIL)]  # not the seed's ids
        emails = client.call(
            "Email/get", {"ids": [email_id(mid) for mid in sorted(same)], "properties": GOT}
        )["list"]
        assert "mrf1." not in str(emails)
        by_name = {names[int(e.pop("id")[1:])]: e for e in emails}
        answers.append(sorted(by_name.items()))
    return answers


def test_sealed_mail_answers_as_the_same_mail_kept_clear(
    owners: tuple[Server, list[Any]],
) -> None:
    server, [clear, sealed] = owners
    expected = _answers(server, *clear)
    assert expected[0] == ["f", "b", "a"]  # the comparison is not vacuous
    assert _answers(server, *sealed) == expected


def test_email_get_shows_opened_headers(sealed_store: Store) -> None:
    """Sender, recipients, subject, preview and Message-ID of a sealed email, in clear."""
    alice = seed(sealed_store, "alice")
    for server in run_server(sealed_store):
        with Jmap(server, alice) as client:
            (email,) = client.call(
                "Email/get", {"ids": [email_id(alice.messages["reply"])], "properties": GOT}
            )["list"]
    assert email["subject"] == "Re: Hello walrus"
    assert email["from"] == [{"name": "Bob", "email": "bob@example.net"}]
    assert email["to"] == [{"name": "Alice", "email": "alice@example.org"}]
    assert email["messageId"] == ["reply@x"] and email["inReplyTo"] == ["hello@x"]
    assert "walrus is well" in email["preview"]


def test_sealed_rows_are_opened_only_where_the_other_conditions_allow(
    sealed_store: Store,
) -> None:
    """A subject condition AND-ed with a date opens the subjects of that day's mail only."""
    import mailroom.jmap.methods  # noqa: F401 - emailquery's import order
    from mailroom.jmap.emailquery import EmailFilter
    from mailroom.jmap.mapping import role_labels

    alice = seed(sealed_store, "alice")  # four messages, minutes 0 to 20 (and "report")
    with sealed_store.session() as session:
        roles = role_labels(session, alice.user_id)

        def cost(node: dict[str, Any]) -> tuple[int, list[int]]:
            compiler = EmailFilter(session, alice.user_id, roles, tabs=False)
            condition = compiler.compile(node)
            found = session.scalars(select(Message.id).where(condition).order_by(Message.id))
            return compiler.sealed.opened_values, list(found)

        everything = cost({"subject": "walrus"})
        assert everything == (4, [alice.messages["hello"], alice.messages["reply"]])
        early = {"before": "2024-03-01T09:01:00Z"}  # "hello" alone
        assert cost({"subject": "walrus", **early}) == (1, [alice.messages["hello"]])
        nested = {
            "operator": "AND",
            "conditions": [
                early,
                {"operator": "NOT", "conditions": [{"subject": "walrus"}, {"from": "bob"}]},
            ],
        }
        assert cost(nested) == (3, [])  # one subject, one sender (its name and address)
        assert cost({"inMailbox": "M0"})[0] == 0  # no sealed text condition: nothing opened
