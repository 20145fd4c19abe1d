"""What every command shares: settings, the store, and plain-sentence errors."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from mailroom.config import Settings, load_settings
from mailroom.errors import ConfigError, MailroomError
from mailroom.store.engine import Store, open_store

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class AppContext:
    """Settings from environment and global flags; the store opened on first use."""

    data_dir: Path | None = None
    database_url: str | None = None
    _settings: Settings | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)

    @property
    def settings(self) -> Settings:
        """The settings in force (flags override the environment)."""
        if self._settings is None:
            self._settings = load_settings(data_dir=self.data_dir, database_url=self.database_url)
        return self._settings

    @property
    def store(self) -> Store:
        """The store, opened and migrated on first use."""
        if self._store is None:
            settings = self.settings
            self._store = open_store(settings.resolved_database_url, settings.data_dir)
        return self._store


pass_app = click.make_pass_decorator(AppContext, ensure=True)


def plain_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn a MailroomError into one sentence on stderr and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except MailroomError as exc:
            click.echo(f"mailroom: {exc}", err=True)
            sys.exit(1)

    return wrapper


def setup_logging(verbose: bool) -> None:
    """Plain-sentence logs on stderr; INFO with --verbose, WARNING otherwise."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def echo_json(obj: Any) -> None:
    """Print one JSON object on its own line."""
    import json

    click.echo(json.dumps(obj, ensure_ascii=False, default=str))


def read_password(password_file: Path | None, password_stdin: bool) -> str:
    """The password from exactly one source (its first line, line end removed).

    Never from the command line, where other users of the machine could read it.
    A ConfigError in one plain sentence otherwise.
    """
    if (password_file is None) == (not password_stdin):
        raise ConfigError(
            "Give the password with exactly one of --password-file or --password-stdin."
        )
    if password_file is not None:
        try:
            text = password_file.expanduser().read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"The password file {password_file} does not exist.") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise ConfigError(
                f"The password file {password_file} is not readable ({reason})."
            ) from None
    else:
        text = sys.stdin.read()
    lines = text.splitlines()
    password = lines[0] if lines else ""
    if not password:
        raise ConfigError("The password is empty; give a password of at least one character.")
    return password


def progress_bar() -> Progress:
    """The bar long commands show on a terminal (none when stderr is not one)."""
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        disable=not sys.stderr.isatty(),
        transient=True,
    )
