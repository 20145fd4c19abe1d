"""IMAP folder changes (providers/imap/folder_ops.py) against a private Dovecot ("." nests)."""

from __future__ import annotations

import pytest
from imapclient import IMAPClient

from mailroom.config import Settings
from mailroom.labels.lifecycle import LabelLifecycle, LabelRefused
from mailroom.providers.imap.propagator import propagate_pending
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.imap.views import sync_all


def _user(store: Store, account: int) -> int:
    with store.session() as session:
        found = session.get(Account, account)
        assert found is not None
        return found.user_id


def test_a_name_with_the_servers_delimiter_is_never_created(
    store: Store, settings: Settings, account: int, other: IMAPClient
) -> None:
    """Before any sync the delimiter is unknown; the propagator still refuses to nest "v1.2"."""
    user = _user(store, account)
    with store.session() as session:
        LabelLifecycle(session, user).create("v1.2")
    result = propagate_pending(store, account, settings=settings)
    assert (result.done, result.retried) == (0, 1)
    assert not any(name.startswith("v1") for _f, _d, name in other.list_folders())
    sync_all(store, account, settings)
    with store.session() as session, pytest.raises(LabelRefused) as refused:
        LabelLifecycle(session, user).create("v2.0")
    assert refused.value.field == "name"


def test_a_top_level_label_goes_where_the_server_keeps_its_folders(
    store: Store, settings: Settings, account: int, other: IMAPClient
) -> None:
    """Created, the folder is listed and subscribed; renamed, the subscription follows."""
    sync_all(store, account, settings)
    user = _user(store, account)
    with store.session() as session:
        label = LabelLifecycle(session, user).create("Receipts").id
    assert propagate_pending(store, account, settings=settings).done == 1
    assert "Receipts" in {name for _f, _d, name in other.list_sub_folders()}
    with store.session() as session:
        LabelLifecycle(session, user).update(label, name="Bills")
    assert propagate_pending(store, account, settings=settings).done == 1
    subscribed = {name for _f, _d, name in other.list_sub_folders()}
    assert "Bills" in subscribed and "Receipts" not in subscribed
