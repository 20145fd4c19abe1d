"""The exception tree of mailroom.

Every error a user can cause carries one plain sentence saying what is wrong
and what to do; the CLI prints that sentence and exits non-zero, never a
traceback::

    MailroomError                 base; str(error) is the user-facing sentence
    ├── ConfigError               bad setting, flag or environment value
    ├── StoreError                the database cannot be opened or migrated
    ├── SourceError               an import path is missing, unreadable or unknown
    ├── NotFoundError             a named user, account, message or thread is unknown
    ├── RuleError                 an owner's rule is invalid (mailroom.rules)
    └── ProviderError             a mail provider refused or failed (see providers.base)
"""

from __future__ import annotations


class MailroomError(Exception):
    """Base class: the message is one plain sentence meant for the user."""


class ConfigError(MailroomError):
    """A setting, flag or environment value is wrong."""


class SealedWithoutKeys(ConfigError):
    """Sealed mail was read through a bare file reader (no session, so no keys); a caller
    with a store retries through a session of it (``crypto.mail_reading``)."""


class StoreError(MailroomError):
    """The database cannot be reached, opened or migrated."""


class SourceError(MailroomError):
    """A local mail source (mbox, Maildir, .eml folder) cannot be read."""


class NotFoundError(MailroomError):
    """A named object does not exist for this owner."""


class RuleError(MailroomError):
    """A rule the owner wrote is invalid: no condition, no action, an unknown tab, ..."""


class ProviderError(MailroomError):
    """A mail provider refused or failed an operation."""


def unknown_user(name: str) -> NotFoundError:
    """The one sentence for a user name that is not in the store."""
    return NotFoundError(f"There is no user called {name!r}; create it with `mailroom user add`.")
