"""What every command shares: settings, the store, and plain-sentence errors."""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar
from urllib.parse import unquote

import click

from mailroom.config import Settings, load_settings
from mailroom.errors import ConfigError, MailroomError, StoreError

if TYPE_CHECKING:
    from rich.progress import Progress
    from sqlalchemy.orm import Session

    from mailroom.store.engine import Store
    from mailroom.store.reader import Reader, SqliteReader

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class AppContext:
    """Settings from environment and global flags; the store opened on first use."""

    data_dir: Path | None = None
    database_url: str | None = None
    _settings: Settings | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)
    _reader: SqliteReader | None = field(default=None, repr=False)
    _session: Session | None = field(default=None, repr=False)
    _scopes: ExitStack = field(default_factory=ExitStack, repr=False)

    @property
    def settings(self) -> Settings:
        """The settings in force (flags override the environment)."""
        if self._settings is None:
            self._settings = load_settings(data_dir=self.data_dir, database_url=self.database_url)
        return self._settings

    @property
    def store(self) -> Store:
        """The store, created if there is none yet, opened and migrated on first use."""
        if self._store is None:
            from mailroom.store.engine import open_store

            settings = self.settings
            self._store = self._with_sealing(
                open_store(settings.resolved_database_url, settings.data_dir)
            )
        return self._store

    def _with_sealing(self, store: Store) -> Store:
        """``store`` carrying the installation's keys (``crypto.sealing``): sealed mail opens,
        and new mail is sealed when MAILROOM_ENCRYPT_MAIL is on."""
        from mailroom.crypto.sealing import sealing_from_settings

        try:
            store.sealing = sealing_from_settings(self.settings)
        except BaseException:
            store.dispose()
            raise
        return store

    @property
    def reader(self) -> Reader:
        """Read-only SQL on the existing store (``store.reader``), for the read commands.

        A SQLite store whose schema is current is read with the standard library
        alone; any other store (PostgreSQL, or a schema to migrate first) through
        a session of :attr:`existing_store`.
        """
        if self._reader is not None:
            return self._reader
        if self._session is None:
            settings = self.settings
            path = sqlite_path(settings.resolved_database_url)
            if path is not None and self._store is None:
                self._reader = current_sqlite_reader(settings, path)
                if self._reader is not None:
                    return self._reader
            self._session = self._scopes.enter_context(self.existing_store.session())
        from mailroom.store.reader import SessionReader

        return SessionReader(self._session)

    def close(self) -> None:
        """Release the store's connections (the command is done)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._scopes.close()  # the read session's scope ends (Store.session commits, closes)
        self._session = None
        if self._store is not None:
            self._store.dispose()
            self._store = None

    @property
    def existing_store(self) -> Store:
        """The store for commands that read or change mail: never created, StoreError if absent.

        Creating an empty store here would only lead to "There is no user called
        'me'" about a store the user never meant to use. Alembic (a fifth of the
        start-up of a read command) is imported only when the schema is behind.
        """
        if self._store is None:
            settings = self.settings
            url = settings.resolved_database_url
            path = sqlite_path(url)
            if path is not None and not path.is_file():
                raise no_store(settings, path)
            from mailroom.store.engine import open_store
            from mailroom.store.migrate import schema_revision, upgrade

            store = open_store(url, settings.data_dir, migrate=False)
            try:
                current = schema_revision(store)
                if current is None:
                    raise no_store(settings, path)
                if current != head_revision():
                    upgrade(store)
            except BaseException:
                store.dispose()
                raise
            self._store = self._with_sealing(store)
        return self._store


_SQLITE_URL = re.compile(r"^sqlite(\+\w+)?:///(?P<path>[^?]*)(\?.*)?$")


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL (None for other databases and in-memory SQLite).

    Read by hand as SQLAlchemy's URL rules have it (``sqlite:///relative``,
    ``sqlite:////absolute``, an optional driver and query), so that finding the
    store does not import SQLAlchemy.
    """
    match = _SQLITE_URL.match(url)
    if match is None:
        return None  # another database, or a URL opening the store will explain
    path = match.group("path")
    if path in ("", ":memory:"):
        return None
    return Path(unquote(path)).expanduser()


def current_sqlite_reader(settings: Settings, path: Path) -> SqliteReader | None:
    """A standard-library reader of the SQLite store at ``path`` if its schema is current.

    None when the file is not a store of the current schema (or not a database at
    all): the caller then opens it the full way, which migrates it or says what
    is wrong in the usual sentences. The data dir and the file are made private
    as opening the store would.
    """
    import sqlite3

    from mailroom.store.files import private_dir, private_file
    from mailroom.store.reader import SqliteReader

    if not path.is_file():
        raise no_store(settings, path)
    private_dir(settings.data_dir)
    private_file(path)
    try:
        reader = SqliteReader(path)
    except sqlite3.Error:
        return None
    try:
        rows = reader.rows("SELECT version_num FROM alembic_version")
    except sqlite3.Error:
        rows = []
    if rows and str(rows[0][0]) == head_revision():
        return reader
    reader.close()
    return None


def no_store(settings: Settings, path: Path | None) -> StoreError:
    """The one sentence for a read command that finds no store where it looked."""
    where = f"in {settings.data_dir}" if path is not None else "in that database"
    return StoreError(
        f"There is no mailroom store {where}; import mail first (`mailroom import PATH`) or "
        "point --data-dir or MAILROOM_DATA_DIR (also read from ./.env) at your store."
    )


_REVISION = re.compile(r"^(down_revision|revision)\b[^=\n]*=\s*(.+)$", re.MULTILINE)


@functools.cache
def head_revision() -> str | None:
    """The newest migration's revision, read from the migration files without Alembic.

    None when the files do not name exactly one head: the caller then lets Alembic decide.
    """
    from mailroom.store import migrations

    revisions: set[str] = set()
    parents: set[str] = set()
    folder = Path(migrations.__file__).parent / "versions"
    for entry in folder.iterdir():
        if not entry.name.endswith(".py") or entry.name.startswith("__"):
            continue
        for kind, value in _REVISION.findall(entry.read_text(encoding="utf-8")):
            names = re.findall(r"[\"']([^\"']+)[\"']", value)
            (revisions if kind == "revision" else parents).update(names)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


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


def setup_logging(verbose: bool, *, engine: bool = True) -> None:
    """Plain-sentence logs on stderr; INFO with --verbose, WARNING otherwise.

    A foreground command (``engine`` False) prints the reason of a failure itself,
    so the operator log's copy of it (``mailroom.operator``) is shown only with -v.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not engine and not verbose:
        logging.getLogger("mailroom.operator").setLevel(logging.ERROR)


def format_option(
    default: str, machine: str, help: str | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``--format {default,machine}`` stored as ``output``: one for people, one for programs."""
    return click.option(
        "--format",
        "output",
        type=click.Choice([default, machine]),
        default=default,
        show_default=True,
        help=help,
    )


def echo_json(obj: Any) -> None:
    """Print one JSON object on its own line."""
    import json

    click.echo(json.dumps(obj, ensure_ascii=False, default=str))


def password_options(func: Callable[P, R]) -> Callable[P, R]:
    """``--password-file F`` / ``--password-stdin``: the two ways a command takes a password."""
    func = click.option(
        "--password-stdin", is_flag=True, help="Read the password from standard input."
    )(func)
    return click.option(
        "--password-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Read the password from the first line of this file.",
    )(func)


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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        disable=not sys.stderr.isatty(),
        transient=True,
    )
