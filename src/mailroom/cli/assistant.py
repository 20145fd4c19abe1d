"""``mailroom assistant on|off|stats``: the model that sorts mail (SPEC §9).

The operator chooses the model (``MAILROOM_ASSISTANT``, docs/operations.md);
``on``/``off`` switch it for one owner; ``stats`` shows the hold figures the
admin page shows: median and p95 hold time, and how much mail was released
before the model answered.
"""

from __future__ import annotations

import click

from mailroom.cli.context import AppContext, echo_json, format_option, pass_app, plain_errors
from mailroom.config import DEFAULT_OWNER

owner_option = click.option(
    "--owner", default=DEFAULT_OWNER, show_default=True, help="Whose mail the model sorts."
)


@click.group("assistant")
def assistant_group() -> None:
    """The assistant: a model that sorts new mail into tabs for owners who switch it on."""


def _switch(app: AppContext, owner: str, on: bool) -> None:
    from mailroom.assistant.config import AssistantConfig, set_owner
    from mailroom.owners import get_user

    config = AssistantConfig.from_settings(app.settings)
    with app.existing_store.session() as session:
        set_owner(session, get_user(session, owner).id, on)
    if not on:
        click.echo(f"The assistant is off for {owner}.")
    elif config.enabled:
        click.echo(f"The assistant ({config.adapter}) now sorts new mail of {owner}.")
    else:
        click.echo(
            f"The assistant is on for {owner}, but no model is configured: "
            "set MAILROOM_ASSISTANT (docs/operations.md)."
        )


@assistant_group.command("on")
@owner_option
@pass_app
@plain_errors
def on_command(app: AppContext, owner: str) -> None:
    """Let the model sort this owner's new mail (held until its verdict)."""
    _switch(app, owner, True)


@assistant_group.command("off")
@owner_option
@pass_app
@plain_errors
def off_command(app: AppContext, owner: str) -> None:
    """Stop the model sorting this owner's mail (the rule cascade alone decides)."""
    _switch(app, owner, False)


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} s"


@assistant_group.command("stats")
@click.option("--owner", default=None, help="One owner's figures (default: everyone's).")
@format_option("text", "json")
@pass_app
@plain_errors
def stats_command(app: AppContext, owner: str | None, output: str) -> None:
    """Hold times of the last 7 days: median, p95, and the share released before the verdict."""
    from datetime import UTC, datetime

    from mailroom.assistant.config import AssistantConfig
    from mailroom.assistant.stats import hold_stats
    from mailroom.reading import user_id

    config = AssistantConfig.from_settings(app.settings)
    reader = app.reader  # plain SQL, as the other read commands
    stats = hold_stats(reader, datetime.now(UTC), user_id(reader, owner) if owner else None)
    share = stats.before_verdict_share
    if output == "json":
        echo_json(
            {
                "model": config.adapter,
                "holdMaxSeconds": config.hold_max_seconds,
                "released": stats.released,
                "heldNow": stats.held_now,
                "medianSeconds": stats.median_seconds,
                "p95Seconds": stats.p95_seconds,
                "releasedBeforeVerdict": stats.before_verdict,
            }
        )
        return
    click.echo(f"model: {config.adapter}, hold at most {config.hold_max_seconds} s")
    click.echo(f"held now: {stats.held_now}; released in the last 7 days: {stats.released}")
    median, p95 = _seconds(stats.median_seconds), _seconds(stats.p95_seconds)
    click.echo(f"hold time: median {median}, p95 {p95}")
    if share is not None:
        click.echo(
            f"released before the verdict: {stats.before_verdict} ({share:.0%}); "
            "the model's answer moved them afterwards, or never came"
        )
