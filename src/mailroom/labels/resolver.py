"""Find-or-create labels and bindings.

Two steps: first the user's label (by path, creating the parent chain for
nested names), then the binding of that label to an account with the
provider's id. Same-named folders of two accounts therefore become one label,
which is what makes the unified inbox fall out of the model.

System labels are found by role, not by name: an IMAP folder flagged
``\\Sent`` named "Gesendet" binds to the user's Sent label. A new system
label gets the ``sort_order`` of its role (:data:`SYSTEM_SORT_ORDER`, Inbox
first), so a client sorting mailboxes by order then name lists them as
Mailbox/query's tie-break does.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from mailroom.labels.roles import SYSTEM_LABELS
from mailroom.store.models import Label, LabelBinding

# Folder names (lower-case) that mean a system role when the provider does not say so.
ROLE_BY_FOLDER_NAME: dict[str, str] = {
    "inbox": "inbox",
    "sent": "sent",
    "sent items": "sent",
    "sent messages": "sent",
    "sent mail": "sent",
    "gesendet": "sent",
    "drafts": "drafts",
    "entwürfe": "drafts",
    "archive": "archive",
    "archiv": "archive",
    "all mail": "archive",
    "spam": "spam",
    "junk": "spam",
    "junk e-mail": "spam",
    "junk email": "spam",
    "bulk mail": "spam",
    "trash": "trash",
    "deleted items": "trash",
    "deleted messages": "trash",
    "papierkorb": "trash",
    "bin": "trash",
}


# The place of each system label among the user's mailboxes (JMAP sortOrder),
# also Mailbox/query's tie-break (mailroom.jmap.mapping.SORT_ORDER); user labels keep 0.
SYSTEM_SORT_ORDER: dict[str, int] = {
    "inbox": 1,
    "starred": 2,
    "snoozed": 3,
    "drafts": 4,
    "sent": 5,
    "archive": 6,
    "spam": 7,
    "trash": 8,
}


def role_for_folder_name(name: str) -> str | None:
    """The system role a folder name implies, if any (``INBOX`` → inbox, ``Junk`` → spam)."""
    return ROLE_BY_FOLDER_NAME.get(name.strip().lower())


def system_label(session: Session, user_id: int, role: str) -> Label:
    """The user's label with this system role, created on first use."""
    label = session.scalar(select(Label).where(Label.user_id == user_id, Label.role == role))
    if label is not None:
        return label
    name = SYSTEM_LABELS[role]
    return _get_or_create(session, user_id, name, name, None, role, SYSTEM_SORT_ORDER[role])


def ensure_system_labels(session: Session, user_id: int) -> dict[str, int]:
    """Create every system label of the user; returns role → label id."""
    return {role: system_label(session, user_id, role).id for role in SYSTEM_LABELS}


def resolve_path(session: Session, user_id: int, parts: list[str]) -> Label:
    """The user label for a nested name given as parts (``["Work", "Invoices"]``).

    Parents are created as needed; a single-part name with a system meaning
    resolves to the system label.
    """
    clean = [part.strip() for part in parts if part.strip()]
    if not clean:
        return system_label(session, user_id, "inbox")
    if len(clean) == 1 and (role := role_for_folder_name(clean[0])):
        return system_label(session, user_id, role)
    parent: Label | None = None
    for depth in range(len(clean)):
        path = "/".join(clean[: depth + 1])
        parent = _get_or_create(
            session, user_id, clean[depth], path, parent.id if parent else None, None
        )
    assert parent is not None
    return parent


def bind(session: Session, label_id: int, account_id: int, provider_ref: str) -> LabelBinding:
    """The binding of a label to an account with the provider's id (idempotent)."""
    binding = session.scalar(
        select(LabelBinding).where(
            LabelBinding.account_id == account_id, LabelBinding.provider_ref == provider_ref
        )
    )
    if binding is not None:
        if binding.label_id != label_id:
            binding.label_id = label_id
        return binding
    binding = session.scalar(
        select(LabelBinding).where(
            LabelBinding.account_id == account_id, LabelBinding.label_id == label_id
        )
    )
    if binding is not None:
        binding.provider_ref = provider_ref
        return binding
    binding = LabelBinding(label_id=label_id, account_id=account_id, provider_ref=provider_ref)
    session.add(binding)
    session.flush()
    return binding


def _get_or_create(
    session: Session,
    user_id: int,
    name: str,
    path: str,
    parent_id: int | None,
    role: str | None,
    sort_order: int = 0,
) -> Label:
    label = session.scalar(select(Label).where(Label.user_id == user_id, Label.path == path))
    if label is not None:
        if role and label.role is None:
            label.role = role
            label.sort_order = label.sort_order or sort_order
        return label
    try:
        with session.begin_nested():
            label = Label(
                user_id=user_id,
                name=name,
                path=path,
                parent_id=parent_id,
                role=role,
                sort_order=sort_order,
            )
            session.add(label)
    except IntegrityError:
        label = session.scalars(
            select(Label).where(Label.user_id == user_id, Label.path == path)
        ).one()
    return label
