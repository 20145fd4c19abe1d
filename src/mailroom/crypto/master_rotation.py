"""Rotating the master key: re-wrap every data key and re-seal every stored secret.

No mail is re-encrypted: mail is under owners' data keys, and only their
wrapping changes. One transaction re-wraps the data keys (when the master
key wraps them) and re-seals every secret sealed by the master key —
account passwords and OAuth token sets (``account:<id>``), outgoing
passwords (``account:<id>:smtp``) and webhook signing secrets
(``webhook:<id>``). Each value is first tried with the new key and left
alone when that opens it, so a rotation killed at any point is finished by
running it again: before its commit nothing changed, after it everything
opens with the new key already.

The key file itself is swapped by :func:`swap_key_files` only after the
commit and a check that every value opens with the new key; the old key
stays beside it (``master.key.old``): backups made before the rotation are
sealed under a key derived from it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.crypto.datakeys import wrap_context
from mailroom.crypto.wrapping import KeyWrapper
from mailroom.errors import ConfigError
from mailroom.secrets import SecretBox
from mailroom.store.models import Account, OwnerKey, WebhookEndpoint


@dataclass
class Rewrapped:
    """How many values a rotation changed, and how many were under the new key already."""

    data_keys: int = 0
    secrets: int = 0
    already: int = 0


def _sealed_values(session: Session) -> list[tuple[object, str, str]]:
    """Every (row, attribute, associated data) holding a secret sealed by the master key."""
    values: list[tuple[object, str, str]] = []
    for account in session.scalars(select(Account).order_by(Account.id)):
        if account.secret:
            values.append((account, "secret", f"account:{account.id}"))
        if account.smtp_secret:
            values.append((account, "smtp_secret", f"account:{account.id}:smtp"))
    for endpoint in session.scalars(select(WebhookEndpoint).order_by(WebhookEndpoint.id)):
        if endpoint.secret:
            values.append((endpoint, "secret", f"webhook:{endpoint.id}"))
    return values


def _unwraps(wrapper: KeyWrapper, row: OwnerKey) -> bool:
    try:
        wrapper.unwrap(row.wrapped, wrap_context(row.user_id, row.version))
    except ConfigError:
        return False
    return True


def _unwrap_any(wrappers: Sequence[KeyWrapper], row: OwnerKey) -> bytes:
    context = wrap_context(row.user_id, row.version)
    for wrapper in wrappers[:-1]:
        try:
            return wrapper.unwrap(row.wrapped, context)
        except ConfigError:
            continue
    # The last one's error, in one sentence, when none opens it.
    return wrappers[-1].unwrap(row.wrapped, context)


def _box_opens(box: SecretBox, sealed: bytes, context: str) -> bool:
    try:
        box.open(sealed, context)
    except ConfigError:
        return False
    return True


def rewrap(
    session: Session,
    old_box: SecretBox,
    new_box: SecretBox,
    old_wrappers: Sequence[KeyWrapper],
    new_wrapper: KeyWrapper,
) -> Rewrapped:
    """Re-seal every secret and re-wrap every data key under the new keys (in ``session``).

    A data key is opened by the first of ``old_wrappers`` that opens it: the old master
    key, and the operator key file when one is configured — so the same run also moves
    data keys from the master key to a key file (``MAILROOM_KEY_WRAPPER=keyfile``).
    """
    done = Rewrapped()
    for row in session.scalars(select(OwnerKey).order_by(OwnerKey.id)):
        context = wrap_context(row.user_id, row.version)
        if row.wrapped_by == new_wrapper.key_id and _unwraps(new_wrapper, row):
            done.already += 1
            continue
        row.wrapped = new_wrapper.wrap(_unwrap_any(old_wrappers, row), context)
        row.wrapped_by = new_wrapper.key_id
        done.data_keys += 1
    for holder, attribute, context in _sealed_values(session):
        sealed: bytes = getattr(holder, attribute)
        if _box_opens(new_box, sealed, context):
            done.already += 1
            continue
        setattr(holder, attribute, new_box.seal(old_box.open(sealed, context), context))
        done.secrets += 1
    session.flush()
    return done


def unreadable(session: Session, box: SecretBox, wrapper: KeyWrapper) -> list[str]:
    """What does not open with ``box`` and ``wrapper`` (empty after a finished rotation)."""
    left = [
        f"data key v{row.version} of owner {row.user_id}"
        for row in session.scalars(select(OwnerKey))
        if not _unwraps(wrapper, row)
    ]
    for holder, attribute, context in _sealed_values(session):
        if not _box_opens(box, getattr(holder, attribute), context):
            left.append(context)
    return left


def swap_key_files(current: Path, new: Path) -> Path:
    """Make ``new`` the key at ``current``, keeping the old key as ``current.old``; that path.

    The steps can be repeated after a kill: the old key is hard-linked to
    ``.old`` (kept if it is there already) before ``new`` replaces ``current``
    in one rename.
    """
    old = current.with_name(current.name + ".old")
    if old.exists() and old.read_bytes() != current.read_bytes():
        # The old key of an earlier rotation: kept too, under its time.
        os.replace(old, old.with_name(f"{old.name}.{int(old.stat().st_mtime)}"))
    if not old.exists():
        os.link(current, old)
    os.replace(new, current)
    return old
