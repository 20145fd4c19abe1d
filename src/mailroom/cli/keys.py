"""``mailroom keys init``: create the master key that encrypts account passwords."""

from __future__ import annotations

from pathlib import Path

import click

from mailroom.cli.audit import record_command
from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.secrets import default_key_file, write_key_file


@click.group("keys")
def keys_group() -> None:
    """The master key that encrypts stored passwords (kept outside the data dir)."""


@keys_group.command("init")
@click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the key (default: MAILROOM_MASTER_KEY_FILE, else the user config dir).",
)
@pass_app
@plain_errors
def keys_init_command(app: AppContext, path: Path | None) -> None:
    """Create a new master key file (mode 0600); never overwrites an existing one."""
    settings = app.settings
    target = path or settings.master_key_file or default_key_file()
    written = write_key_file(target, settings.data_dir)
    record_command(app, "key.init", f"master key file {written}")
    click.echo(f"Created the master key file {written}.")
    click.echo(
        f"Set MAILROOM_MASTER_KEY_FILE={written} for every mailroom process, and back it up "
        "apart from the data dir: without it the stored passwords cannot be read."
    )
