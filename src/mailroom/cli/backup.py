"""``mailroom backup create | verify | restore PATH``: encrypted backups of the store.

The backup key is derived from the master key unless ``--key-file`` names a
key of the operator's own (``mailroom keys init --file F`` makes one). Either
way the key is what a new machine needs to restore: keep it apart from the
backups.
"""

from __future__ import annotations

from pathlib import Path

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors

_KEY_HELP = (
    "Use the backup key in this file (44 characters of base64) instead of one derived "
    "from the master key."
)


def _key_option(func: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--key-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help=_KEY_HELP,
    )(func)


@click.group("backup")
def backup_group() -> None:
    """Encrypted backups of the store: create, verify, restore into an empty store."""


@backup_group.command("create")
@click.argument("path", type=click.Path(path_type=Path))
@_key_option
@pass_app
@plain_errors
def create_command(app: AppContext, path: Path, key_file: Path | None) -> None:
    """Write an encrypted, consistent snapshot of the running store to PATH (atomically)."""
    from mailroom.backup.keys import backup_key
    from mailroom.backup.operations import create_backup

    key = backup_key(app.settings, key_file)
    written = create_backup(app.existing_store, app.settings.data_dir, path, key)
    click.echo(
        f"Backed up the {written.manifest['store']} store (schema "
        f"{written.manifest['schema_revision']}) to {written.path}: {written.size} bytes, "
        f"SHA-256 {written.sha256}."
    )


@backup_group.command("verify")
@click.argument("path", type=click.Path(path_type=Path))
@_key_option
@pass_app
@plain_errors
def verify_command(app: AppContext, path: Path, key_file: Path | None) -> None:
    """Decrypt PATH and check every chunk and file checksum, restoring nothing."""
    from mailroom.backup.keys import backup_key
    from mailroom.backup.operations import verify_backup

    manifest = verify_backup(path, backup_key(app.settings, key_file))
    click.echo(
        f"{path} is a good backup of a {manifest['store']} store (schema "
        f"{manifest['schema_revision']}), made {manifest['created']}."
    )


@backup_group.command("restore")
@click.argument("path", type=click.Path(path_type=Path))
@_key_option
@pass_app
@plain_errors
def restore_command(app: AppContext, path: Path, key_file: Path | None) -> None:
    """Restore PATH into the configured store, which must be empty (a new one)."""
    from mailroom.backup.keys import backup_key
    from mailroom.backup.operations import restore_backup

    settings = app.settings
    restored = restore_backup(
        settings.resolved_database_url,
        settings.data_dir,
        path,
        backup_key(settings, key_file),
    )
    click.echo(f"Restored the backup made {restored.manifest['created']} into {restored.url}.")
