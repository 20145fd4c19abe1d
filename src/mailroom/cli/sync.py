"""``mailroom sync [ACCOUNT] [--until-imported]``: sync and import in the foreground.

Per account, through the provider registry (this module knows no provider):
propagate pending local changes, sync (new mail and changes made elsewhere), then
import history. Without ``--until-imported`` one import page per account is run —
what one scheduler tick would do; with it, pages of all accounts interleave until
every account's history is in, with a progress bar. A refused login is reported in
one sentence and the other accounts go on; the exit status is 1 if any failed.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import click
from rich.progress import TaskID
from sqlalchemy import select

from mailroom.cli.context import AppContext, pass_app, plain_errors, progress_bar
from mailroom.errors import MailroomError, NotFoundError
from mailroom.labels.propagation import propagate_pending
from mailroom.owners import DEFAULT_OWNER, get_user
from mailroom.providers import registry
from mailroom.providers.base import AuthError, Importer, TransientError
from mailroom.providers.errors import account_outcome
from mailroom.store.checkpoints import background_checkpoints
from mailroom.store.models import Account

RETRIES = 3  # consecutive broken connections tolerated per account while importing


@dataclass
class _Run:
    account_id: int
    name: str
    importer: Importer | None
    task: TaskID | None = None
    failures: int = 0
    done: bool = False
    error: str | None = None


def _said(error: AuthError | TransientError) -> str:
    """The failure in words for whoever runs the command (the operator's reason, once)."""
    outcome = account_outcome(error)
    return f"{outcome.reason}; the next sync tries again" if outcome.retry else outcome.reason


def _load(session_accounts: list[Account]) -> list[Account]:
    return [a for a in session_accounts if a.status != "disconnected"]


@click.command("sync")
@click.argument("account", required=False)
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="Whose accounts to sync.")
@click.option(
    "--until-imported",
    is_flag=True,
    help="Keep importing until every account's history is in (default: one page each).",
)
@pass_app
@plain_errors
def sync_command(app: AppContext, account: str | None, owner: str, until_imported: bool) -> None:
    """Sync accounts (new mail, changes made elsewhere, local changes) and import history."""
    store, settings = app.existing_store, app.settings
    with store.session() as session:
        user = get_user(session, owner)
        query = select(Account).where(Account.user_id == user.id).order_by(Account.name)
        if account is not None:
            query = query.where(Account.name == account)
        accounts = _load(list(session.scalars(query)))
    if account is not None and not accounts:
        raise NotFoundError(f"{owner!r} has no connected account called {account!r}.")
    runs: list[_Run] = []
    failed = False
    for acct in accounts:
        syncer = registry.syncer_for(store, acct.provider, settings)
        if syncer is None:
            continue
        try:
            propagator = registry.propagator_for(store, acct.provider, settings)
            if propagator is not None:
                propagate_pending(store, acct.id, propagator)
            touched = syncer.sync(acct.id)
        except (AuthError, TransientError) as exc:
            click.echo(f"mailroom: {acct.name}: {_said(exc)}", err=True)
            failed = True
            continue
        click.echo(f"{acct.name}: synced ({len(touched)} folders changed).")
        runs.append(_Run(acct.id, acct.name, registry.importer_for(store, acct.provider, settings)))
    if not runs:
        if failed:
            sys.exit(1)
        if not accounts:
            click.echo("There is no account to sync; add one with `mailroom account add imap`.")
        return
    # History comes in bulk: the log is copied back in the background (store.checkpoints).
    with progress_bar() as progress, background_checkpoints(store):
        for run in runs:
            if run.importer is not None:
                state = run.importer.state(run.account_id)
                run.done = not state.importing
                run.task = progress.add_task(
                    f"Importing {run.name}", total=state.total or None, completed=state.done
                )
            else:
                run.done = True
        try:
            while True:
                active = [r for r in runs if not r.done and r.importer is not None]
                if not active:
                    break
                for run in active:
                    assert run.importer is not None
                    try:
                        more = run.importer.import_page(run.account_id)
                        run.failures = 0
                    except TransientError as exc:
                        run.failures += 1
                        if run.failures > RETRIES:
                            run.error, run.done = _said(exc), True
                        else:
                            time.sleep(min(2**run.failures, 10))
                        continue
                    except MailroomError as exc:
                        run.error, run.done = str(exc), True
                        continue
                    state = run.importer.state(run.account_id)
                    if run.task is not None:
                        progress.update(run.task, total=state.total or None, completed=state.done)
                    run.done = not more or not until_imported
        finally:
            for run in runs:
                if run.importer is not None:
                    run.importer.close()
    for run in runs:
        if run.error:
            failed = True
            click.echo(f"mailroom: {run.name}: {run.error}", err=True)
            continue
        if run.importer is None:
            continue
        state = run.importer.state(run.account_id)
        if state.importing:
            click.echo(f"{run.name}: history {state.done}/{state.total} imported, more to come.")
        else:
            click.echo(f"{run.name}: history imported ({state.done} messages).")
    if failed:
        sys.exit(1)
