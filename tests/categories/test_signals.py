"""Each signal of the tab cascade: a message that carries it lands in its tab, explained.

Every case is stored through ``store_batch`` (the ingest pipeline) on SQLite
and on PostgreSQL; the stored tab and stage, ``explain``'s first sentence and
a recomputation from stored data must all agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from mailroom.categories import CategoryFacts, categorize
from mailroom.categories.bodies import bulk_body_sign
from mailroom.categories.recompute import explain, recategorize
from mailroom.store.engine import Store
from tests.categories.test_tabs import ME, Mailbox
from tests.factories import make_message

PIXEL = '<p>Hello</p><img src="https://t.example/o.gif" width="1" height="1" alt="">'
PICTURES = "".join(f'<img src="https://img.example/{i}.jpg">' for i in range(5))


@dataclass(frozen=True)
class Case:
    """A message with one signal, and the sentence explain must give for it."""

    name: str
    explanation: str
    sender: str = "Shop <orders@shop.example>"
    subject: str = "Hello"
    headers: dict[str, str] = field(default_factory=dict)
    html: str | None = None
    to: str = "Someone <someone@elsewhere.example>"

    @property
    def tab(self) -> str:
        return self.explanation.partition(":")[0].lower()

    @property
    def stage(self) -> str:
        return self.explanation.partition("decided by ")[2].partition(" ")[0].rstrip(".")


CASES = [
    Case(
        "one-click",
        "Promotions: decided by promotions (list-unsubscribe-post header).",
        sender="Brand <news@brand.example>",
        headers={"List-Unsubscribe-Post": "List-Unsubscribe=One-Click"},
    ),
    Case(
        "bulk",
        "Promotions: decided by promotions (precedence: bulk).",
        sender="Brand <news@brand.example>",
        headers={"Precedence": "bulk"},
    ),
    Case(
        "sendgrid",
        "Promotions: decided by promotions (x-sg-eid: abc123).",
        sender="Brand <news@brand.example>",
        headers={"X-SG-EID": "abc123"},
    ),
    Case(
        "ses",
        "Promotions: decided by promotions (feedback-id: 1.eu-west-1.x=:AmazonSES).",
        sender="Brand <team@brand.example>",
        headers={"Feedback-ID": "1.eu-west-1.x=:AmazonSES"},
    ),
    Case(
        "mailchimp",
        "Promotions: decided by promotions (x-mailer: MailChimp Mailer - **CID1**).",
        sender="Bakery <hello@bakery.example>",
        headers={"X-Mailer": "MailChimp Mailer - **CID1**"},
    ),
    Case(
        "csa",
        "Promotions: decided by promotions (x-csa-complaints: csa-complaints@eco.de).",
        sender="Markt <newsletter@markt.example>",
        headers={"X-CSA-Complaints": "csa-complaints@eco.de"},
    ),
    Case(
        "substack",
        "Promotions: decided by promotions (x-mailgun-sid: WyJhIl0=).",
        sender="Writer <writer@substack.com>",
        headers={"List-Id": "<writer.substack.com>", "X-Mailgun-Sid": "WyJhIl0="},
    ),
    Case(
        "view-in-browser",
        "Promotions: decided by promotions (a view-in-browser link in the body).",
        sender="Brand <news@brand.example>",
        html='<a href="https://brand.example/w">View this email in your browser</a>',
    ),
    Case(
        "unsubscribe-link",
        "Promotions: decided by promotions (an unsubscribe link in the body).",
        sender="Brand <news@brand.example>",
        html='<p>News</p><a href="https://brand.example/u">Abbestellen</a>',
    ),
    Case(
        "pixel",
        "Promotions: decided by promotions (a tracking pixel in the body).",
        sender="Brand <news@brand.example>",
        html=PIXEL,
    ),
    Case(
        "pictures",
        "Promotions: decided by promotions (a body of 5 images and little text).",
        sender="Brand <news@brand.example>",
        html=PICTURES,
    ),
    Case(
        "selling-words",
        "Promotions: decided by promotions (subject mentions '20% off').",
        sender="Shop <info@shop.example>",
        subject="Today only: 20% off everything",
    ),
    Case(
        "selling-beats-order",
        "Promotions: decided by promotions (list-unsubscribe header).",
        sender="Shop <service@shop.example>",
        subject="10 % Rabatt auf Ihre nächste Bestellung",
        headers={"List-Unsubscribe": "<mailto:out@shop.example>"},
    ),
    Case(
        "shipped",
        "Updates: decided by updates (subject mentions 'order').",
        subject="Your order has shipped",
    ),
    Case(
        "receipt-through-an-esp",
        "Updates: decided by updates (subject mentions 'commande').",
        sender="Fnac <commande@fnac.example>",
        subject="Votre commande a été expédiée",
        headers={"List-Unsubscribe": "<mailto:out@fnac.example>", "X-SG-EID": "x1"},
    ),
    Case(
        "rechnung-number",
        "Updates: decided by updates (subject mentions 'rechnung', "
        "a reference number in the subject).",
        sender="Buchhaltung Müller <m.mueller@stadtwerke.example>",
        subject="Ihre Rechnung 2026-118734",
    ),
    Case(
        "auto-generated",
        "Updates: decided by updates (auto-submitted: auto-generated).",
        sender="Status <ops@hoster.example>",
        subject="Maintenance tonight",
        headers={"Auto-Submitted": "auto-generated"},
    ),
    Case(
        "noreply",
        "Updates: decided by updates (automated sender no-reply@app.example).",
        sender="App <no-reply@app.example>",
        subject="Weekly summary",
    ),
    Case(
        "bounce",
        "Updates: decided by updates (delivery report from mailer-daemon@mx.example).",
        sender="Mail Delivery System <MAILER-DAEMON@mx.example>",
        subject="Undelivered Mail Returned to Sender",
        headers={"Auto-Submitted": "auto-replied"},
    ),
    Case(
        "list-admin",
        "Updates: decided by updates (list server notice from walrus-owner@lists.example).",
        sender="walrus-owner@lists.example",
        subject="walrus mailing list memberships reminder",
        headers={"X-Mailman-Version": "2.1.39", "Precedence": "bulk"},
    ),
    Case(
        "person-invoice",
        "Primary: decided by default.",
        sender="Marta Kowalska <marta@kowalska-design.example>",
        subject="Invoice for the logo work",
        to=ME,
    ),
    Case(
        "friend-delivery",
        "Primary: decided by default.",
        sender="Mum <ruth@home.example>",
        subject="Your birthday present delivery",
        to=ME,
    ),
    Case(
        "out-of-office",
        "Primary: decided by auto_reply (auto-submitted: auto-replied).",
        sender="Priya <priya@acme.example>",
        subject="Re: Q4 plan",
        headers={"Auto-Submitted": "auto-replied"},
    ),
    Case(
        "abwesenheit",
        "Primary: decided by auto_reply (subject starts 'Abwesenheitsnotiz').",
        sender="Thomas <t.berg@firma.example>",
        subject="Abwesenheitsnotiz: Projekt",
    ),
    Case(
        "instagram",
        "Social: decided by social (sender domain mail.instagram.com).",
        sender="Instagram <no-reply@mail.instagram.com>",
        subject="lisa liked your photo",
        headers={"List-Unsubscribe": "<mailto:out@instagram.com>"},
    ),
    Case(
        "mastodon",
        "Social: decided by social (sender domain fosstodon.org).",
        sender="Mastodon <notifications@fosstodon.org>",
        subject="You were mentioned by @lea",
        headers={"Auto-Submitted": "auto-generated"},
    ),
    Case(
        "facebook-header",
        "Social: decided by social (x-facebook-notify header).",
        sender="Group <groupupdates@fb-mail.example>",
        subject="New post in your group",
        headers={"X-Facebook-Notify": "group_activity"},
    ),
    Case(
        "google-group",
        "Forums: decided by forums (x-google-group-id: 12345).",
        sender="Henrik <henrik@mail.example>",
        subject="Async sessions",
        headers={"X-Google-Group-Id": "12345", "List-Unsubscribe": "<mailto:u@g.example>"},
    ),
    Case(
        "discourse",
        "Forums: decided by forums (x-discourse-topic-id: 99).",
        sender="Anna via Forum <notifications@forum.example>",
        subject="[Forum] Zigbee pairing",
        headers={"X-Discourse-Topic-Id": "99", "Auto-Submitted": "auto-generated"},
    ),
    Case(
        "github",
        "Forums: decided by forums (x-github-reason: mention).",
        sender="octo <notifications@github.com>",
        subject="Re: [o/r] Timeouts (Issue #1)",
        headers={"X-GitHub-Reason": "mention", "Precedence": "list"},
    ),
    Case(
        "mailman",
        "Forums: decided by forums (x-beenthere: users@lists.example).",
        sender="Alan <alan@old.example>",
        subject="Re: modules",
        headers={"X-BeenThere": "users@lists.example"},
    ),
    Case(
        "letterrip",
        "Forums: decided by forums (list-subscribe and list-digest headers).",
        sender="Bob <bob@dbs.example>",
        subject="Tiny DNS swap",
        headers={"List-Subscribe": "<mailto:on@l.example>", "List-Digest": "<mailto:d@l.example>"},
    ),
    Case(
        "list-tag",
        "Forums: decided by forums (subject tag [Spambayes] on mail not addressed to you).",
        sender="Tim <tim@python.example>",
        subject="[Spambayes] test sets?",
        to="spambayes@python.example",
    ),
    Case(
        "list-tag-to-me",
        "Primary: decided by default.",
        sender="Tim <tim@python.example>",
        subject="Re: [Spambayes] test sets?",
        to=ME,
    ),
]


def test_each_signal_sorts_and_explains_on_both_stores(store: Store) -> None:
    """Stored tab, stage and explain's sentence per signal; recomputing changes nothing."""
    box = Mailbox(store)
    raws = [
        (
            case.name,
            make_message(
                f"{case.name}@x",
                sender=case.sender,
                subject=case.subject,
                to=case.to,
                headers=case.headers,
                html=case.html,
                body="A few words.\n",
            ),
        )
        for case in CASES
    ]
    box.ingest(raws)
    for case in CASES:
        message = box.message(f"{case.name}@x")
        assert (message.category, message.category_stage) == (case.tab, case.stage), case.name
        with store.session() as session:
            assert explain(session, box.user_id, message.id).lines()[0] == case.explanation
    with store.session() as session:
        assert recategorize(session, box.user_id).changed_messages == 0


def facts(subject: str, sender: str = "orders@shop.example", **headers: str) -> CategoryFacts:
    """Facts of a message with these (lower-case) headers."""
    return CategoryFacts(from_email=sender, subject=subject, headers=headers)


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("Your receipt from Hetzner #1234-5678", "updates"),
        ("Ihre Bestellung wurde versandt", "updates"),
        ("Réinitialisation de votre mot de passe", "updates"),
        ("Black Friday: 30% off your next order", "promotions"),
        ("Re: your order", "primary"),
    ],
)
def test_transactional_words_need_no_selling_words_and_no_reply(
    subject: str, expected: str
) -> None:
    """Order words from a shop make Updates; with selling words or as a reply they do not."""
    assert categorize(facts(subject)).category == expected


def test_correspondent_still_beats_every_rule() -> None:
    """Someone the owner writes to stays Primary even with bulk and social signals."""
    decision = categorize(
        CategoryFacts(
            from_email="friend@linkedin.com",
            subject="Your invoice",
            headers={"list-unsubscribe": "<mailto:x@y>", "precedence": "bulk"},
            correspondents={"friend@linkedin.com"},
        )
    )
    assert (decision.category, decision.stage) == ("primary", "correspondent")


def test_body_signs_look_only_at_bulk_markers() -> None:
    """Plain personal text has no sign; a reply that quotes a newsletter is not bulk mail."""
    assert bulk_body_sign("Hi Sam, see you at 7.\n", None) == ""
    assert bulk_body_sign("", "<p>Photos attached</p><img src='cid:a' width='640'>") == ""
    assert bulk_body_sign("To unsubscribe, reply STOP.", None) == (
        "unsubscribe instructions in the body"
    )
    quoted = facts("Re: this week's deals", "friend@home.example")
    quoted = CategoryFacts(
        from_email=quoted.from_email,
        subject=quoted.subject,
        headers={},
        html_body="<p>Deals</p><a href='https://shop.example/u'>Unsubscribe</a>",
    )
    assert categorize(quoted).category == "primary"


def test_a_long_body_is_searched_at_its_ends_only() -> None:
    """A huge body costs a bounded look: the sign at the end is still found."""
    html = "<p>" + "word " * 200_000 + "</p><a href='https://x.example/u'>Unsubscribe</a>"
    assert bulk_body_sign("", html) == "an unsubscribe link in the body"
