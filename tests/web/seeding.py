"""A small mailbox for the web tests: the user ``me`` and one message in every inbox tab."""

from __future__ import annotations

from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest, make_account
from tests.web.conftest import add_user

# One message per inbox tab, the way the cascade sorts real mail (categories/cascade.py).
TAB_MAIL: dict[str, dict[str, object]] = {
    "primary": {"sender": "Alice Example <alice@example.org>", "subject": "Lunch on Friday?"},
    "promotions": {
        "sender": "Shop <news@shop.example>",
        "subject": "Spring sale: 20% off",
        "headers": {"List-Unsubscribe": "<mailto:unsubscribe@shop.example>"},
    },
    "social": {
        "sender": "LinkedIn <messages-noreply@linkedin.com>",
        "subject": "You appeared in 3 searches",
    },
    "updates": {"sender": "Bank <no-reply@bank.example>", "subject": "Your statement is ready"},
    "forums": {
        "sender": "Dev list <dev@lists.example>",
        "subject": "[dev] Release planning",
        "headers": {"List-Post": "<mailto:dev@lists.example>", "List-Id": "dev.lists.example"},
    },
}


def seed(store: Store) -> tuple[int, int, int]:
    """The user ``me`` with a password and the account ``home``, holding one unread
    message per tab; returns make_account's (user id, account id, inbox id)."""
    account = make_account(store, "me", "home")
    add_user(store, "me")
    ingest(
        store,
        account,
        [
            (tab, make_message(f"{tab}@seed", minutes=index, **fields))  # type: ignore[arg-type]
            for index, (tab, fields) in enumerate(TAB_MAIL.items())
        ],
    )
    return account
