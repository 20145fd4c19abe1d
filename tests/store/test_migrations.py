"""Schema only through Alembic: the migrations match the models and roll back cleanly."""

from __future__ import annotations

from alembic import command

from mailroom.store.engine import Store
from mailroom.store.migrate import alembic_config


def test_models_match_migrations(store: Store) -> None:
    """`alembic check` finds nothing the models have that the migrations lack."""
    command.check(alembic_config(store))


def test_downgrade_to_base_and_upgrade_again(store: Store) -> None:
    """Every migration can be undone and redone on both stores."""
    config = alembic_config(store)
    command.downgrade(config, "base")
    command.upgrade(config, "head")
    command.check(config)


def test_subject_key_migration_fills_existing_rows(store: Store) -> None:
    """Upgrading to 0006 keys the subjects of mail stored before it, as ingest would."""
    from sqlalchemy import select

    from mailroom.conversations.subject import subject_key
    from mailroom.store.models import Message
    from tests.factories import make_message
    from tests.helpers import ingest, make_account

    ingest(store, make_account(store), [("a", make_message("a@x", subject="Re: [list] Plans"))])
    config = alembic_config(store)
    command.downgrade(config, "0005")
    command.upgrade(config, "head")
    with store.session() as session:
        key = session.scalar(select(Message.subject_key))
    assert key is not None and key == subject_key("Plans")


def test_migrations_import_no_live_code() -> None:
    """No migration imports mailroom's own modules: each one is frozen as it was written."""
    from pathlib import Path

    import mailroom.store.migrations as package

    versions = Path(package.__file__).parent / "versions"
    offenders = [
        path.name
        for path in sorted(versions.glob("*.py"))
        if "from mailroom" in path.read_text() or "import mailroom" in path.read_text()
    ]
    assert offenders == []


def test_identity_and_system_order_migration_fills_existing_rows(store: Store) -> None:
    """Upgrading to 0011 marks each account's own-address identity and orders system labels."""
    from sqlalchemy import select

    from mailroom.store.models import Account, Identity, Label
    from tests.helpers import make_account

    user_id, account_id, _ = make_account(store)
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        account.settings = {"login": "me@example.org"}
        for email in ("alias@example.org", "ME@example.org"):
            session.add(Identity(user_id=user_id, account_id=account_id, email=email))
        session.add(Label(user_id=user_id, name="Work", path="Work"))
        trash = session.scalars(select(Label).where(Label.role == "trash")).one()
        trash.sort_order = 42  # a client's own order survives
    config = alembic_config(store)
    command.downgrade(config, "0010")
    command.upgrade(config, "head")
    with store.session() as session:
        defaults = {e: d for e, d in session.execute(select(Identity.email, Identity.is_default))}
        orders = {n: o for n, o in session.execute(select(Label.name, Label.sort_order))}
    assert defaults == {"alias@example.org": False, "ME@example.org": True}
    assert orders["Inbox"] == 1 and orders["Drafts"] == 4 and orders["Spam"] == 7
    assert orders["Trash"] == 42 and orders["Work"] == 0
