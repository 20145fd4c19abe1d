"""Fixtures of the provider contract suite: the IMAP ones (private Dovecot, settings) reused."""

from tests.imap.conftest import dovecot, settings

__all__ = ["dovecot", "settings"]
