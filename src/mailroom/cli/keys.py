"""``mailroom keys``: the master key and owners' data keys.

``keys init`` creates the master key file. ``keys rotate-master`` re-wraps
every owner data key and re-seals every stored secret under a new master
key in one transaction (no mail is re-encrypted) and swaps the key file only
once all of it opens with the new key; killed, it is finished by running it
again. ``keys rotate-owner USER`` starts using a new data key version for
USER and queues the job that re-encrypts their values in resumable batches
in the running engine (``mailroom.jobs.key_rotation``; both versions open
meanwhile); ``--foreground`` runs the batches here instead, ``keys resume``
finishes unfinished rotations here, ``keys status`` shows their progress.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mailroom.cli.audit import record_command
from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.secrets import default_key_file, write_key_file

if TYPE_CHECKING:
    from mailroom.crypto.wrapping import KeyWrapper

log = logging.getLogger(__name__)


@click.group("keys")
def keys_group() -> None:
    """The master key (kept outside the data dir) and owners' data keys."""


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


@keys_group.command("rotate-master")
@click.option(
    "--new-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The new key (from `mailroom keys init --file F`); set it as "
    "MAILROOM_MASTER_KEY_FILE afterwards. Default: a new key swapped into the current file.",
)
@pass_app
@plain_errors
def keys_rotate_master_command(app: AppContext, new_key_file: Path | None) -> None:
    """Re-wrap every data key and re-seal every stored secret under a new master key."""
    import dataclasses

    from mailroom.audit import record
    from mailroom.crypto import MasterKeyWrapper
    from mailroom.crypto.master_rotation import rewrap, swap_key_files, unreadable
    from mailroom.secrets import SecretBox, load_master_key

    settings = app.settings
    old_key = load_master_key(settings)
    current = settings.master_key_file
    if new_key_file is None:
        if current is None or settings.master_key is not None:
            raise ConfigError(
                "The master key comes from MAILROOM_MASTER_KEY, so it cannot be swapped in "
                "place; make a new key with `mailroom keys init --file F` and give "
                "--new-key-file F."
            )
        target = current.with_name(current.name + ".new")
        if not target.exists():  # else: a rotation that was stopped left it; use it again
            write_key_file(target, settings.data_dir)
    else:
        target = new_key_file
    new_key = load_master_key(
        dataclasses.replace(settings, master_key=None, master_key_file=target)
    )
    if new_key == old_key:
        raise ConfigError(f"{target} holds the master key in use; give a new key.")
    old_wrappers, new_wrapper = _wrappers(settings, old_key, new_key)
    old_box, new_box = SecretBox(old_key), SecretBox(new_key)
    click.echo(f"Re-wrapping data keys and secrets under the new master key {target} ...")
    store = app.existing_store
    with store.session() as session:
        done = rewrap(session, old_box, new_box, old_wrappers, new_wrapper)
        record(
            session,
            "key.rotate",
            detail=f"master key {old_wrappers[0].key_id} -> {MasterKeyWrapper(new_key).key_id}, "
            f"data keys under {new_wrapper.key_id}: "
            f"{done.data_keys} data keys and {done.secrets} secrets re-wrapped, "
            f"{done.already} already under the new key",
        )
    with store.session() as session:
        left = unreadable(session, new_box, new_wrapper)
    if left:
        raise ConfigError(
            f"{len(left)} values do not open with the new key ({', '.join(left[:3])}); "
            "the old key was left in place."
        )
    click.echo(
        f"Re-wrapped {done.data_keys} data keys and {done.secrets} secrets "
        f"({done.already} were under the new key already); every one opens with the new key."
    )
    if new_key_file is None and current is not None:
        old = swap_key_files(current, target)
        click.echo(
            f"{current} now holds the new key; the old one is kept in {old}: backups made "
            "before now need it, so delete it only when those backups have expired."
        )
    else:
        click.echo(
            f"Set MAILROOM_MASTER_KEY_FILE={target} for every mailroom process, then remove "
            "the old key (keep a copy while backups made under it are kept)."
        )


def _wrappers(
    settings: Settings, old_key: bytes, new_key: bytes
) -> tuple[list[KeyWrapper], KeyWrapper]:
    """What may have wrapped data keys so far, and what wraps them from now on."""
    from mailroom.crypto import MasterKeyWrapper, wrapper_from_settings
    from mailroom.crypto.choice import with_owner_secrets

    old: list[KeyWrapper] = [with_owner_secrets(settings, MasterKeyWrapper(old_key))]
    if settings.key_wrapper.strip().lower() == "master":
        return old, with_owner_secrets(settings, MasterKeyWrapper(new_key))
    # A key file wraps data keys: its newest version re-wraps those of older versions (and
    # those the master key wrapped before the installation switched to the key file).
    wrapper = wrapper_from_settings(settings)
    return [*old, wrapper], wrapper


_BATCH = click.option(
    "--batch",
    default=500,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Values re-encrypted per transaction (per background job).",
)


@keys_group.command("rotate-owner")
@click.argument("user")
@_BATCH
@click.option(
    "--foreground",
    is_flag=True,
    help="Re-encrypt here and now, to the end, instead of in the running engine's background "
    "job (for an installation with no `mailroom serve` or worker running).",
)
@pass_app
@plain_errors
def keys_rotate_owner_command(app: AppContext, user: str, batch: int, foreground: bool) -> None:
    """Give USER a new data key version; their values are re-encrypted under it in batches.

    New values use the new version at once and both versions open meanwhile. The
    running engine (`mailroom serve`, or a worker serving enrich_backlog) re-encrypts
    in the background, one batch per job; `mailroom keys status` shows how far it is.
    """
    from mailroom.audit import record
    from mailroom.crypto import OwnerKeys, wrapper_from_settings
    from mailroom.crypto.owner_rotation import start_rotation
    from mailroom.crypto.shredding import owner_id

    wrapper = wrapper_from_settings(app.settings)
    store = app.existing_store
    owner = owner_id(store, user)
    with store.session() as session:
        rotation = start_rotation(session, OwnerKeys(session, wrapper), owner)
        rotation_id, versions = rotation.id, (rotation.from_version, rotation.to_version)
        record(
            session,
            "key.rotate",
            user_name=user,
            user_id=owner,
            detail=f"data key v{versions[0]} -> v{versions[1]} started",
        )
    click.echo(f"{user} now encrypts with data key version {versions[1]}; both versions open.")
    if foreground:
        _run(app, wrapper, rotation_id, batch)
        return
    trouble = _queue(app, rotation_id, batch)
    if trouble is not None:
        click.echo(
            f"Rotation {rotation_id} could not be queued ({trouble}); the running engine picks "
            "it up within a minute, or run `mailroom keys resume`."
        )
        return
    click.echo(
        f"Rotation {rotation_id} is queued: the running engine (`mailroom serve`, or a worker "
        "serving enrich_backlog) re-encrypts the older values in the background. Watch it with "
        "`mailroom keys status`; with no engine running, `mailroom keys resume` finishes it here."
    )


def _queue(app: AppContext, rotation_id: int, batch: int) -> str | None:
    """Ask the engine's queue for the rotation's job; why not when the queue could not be
    reached (the rotation is started all the same: the engine's duty queues it)."""
    import time

    from mailroom.jobs.key_rotation import KeyRotationJobs
    from mailroom.jobs.leases import LocalLeases
    from mailroom.jobs.queues import make_queues

    try:
        queues = make_queues(app.settings, ("enrich_backlog",))
        jobs = KeyRotationJobs(app.existing_store, queues, LocalLeases(time.monotonic))
        jobs.request(rotation_id, batch)
    except Exception as exc:
        log.debug("Could not queue key rotation %s.", rotation_id, exc_info=True)
        return str(exc).rstrip(".") or type(exc).__name__
    return None


@keys_group.command("status")
@click.option("--all", "include_done", is_flag=True, help="Finished rotations too.")
@pass_app
@plain_errors
def keys_status_command(app: AppContext, include_done: bool) -> None:
    """Owner key rotations that are running (and finished ones with --all), with their progress."""
    from mailroom.crypto.rotation_progress import rotation_progress

    with app.existing_store.session() as session:
        rotations = rotation_progress(session, include_done=include_done)
    if not rotations:
        click.echo("No owner key rotation is running.")
    for rotation in rotations:
        click.echo(rotation.describe())


@keys_group.command("resume")
@_BATCH
@pass_app
@plain_errors
def keys_resume_command(app: AppContext, batch: int) -> None:
    """Finish every unfinished owner key rotation here, in the foreground (no engine needed)."""
    from mailroom.crypto import wrapper_from_settings
    from mailroom.crypto.owner_rotation import pending_rotations

    wrapper = wrapper_from_settings(app.settings)
    with app.existing_store.session() as session:
        pending = pending_rotations(session)
    if not pending:
        click.echo("No owner key rotation is unfinished.")
    for rotation_id in pending:
        _run(app, wrapper, rotation_id, batch)


def _run(app: AppContext, wrapper: KeyWrapper, rotation_id: int, batch: int) -> None:
    """Run one rotation's batches to the end and say so."""
    from mailroom.crypto.owner_rotation import Rotator

    batches = Rotator(app.existing_store, wrapper, batch).run(rotation_id)
    click.echo(
        f"Rotation {rotation_id} done in {batches} batch(es): every value is under the new "
        "version and the old version is deleted."
    )
