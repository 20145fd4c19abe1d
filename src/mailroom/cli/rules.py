"""``mailroom rules add|list|remove``: the owner's filters, stored in the database."""

from __future__ import annotations

import click

from mailroom.cli.context import AppContext, echo_json, format_option, pass_app, plain_errors
from mailroom.config import DEFAULT_OWNER

# The rules' engine, the ORM and SQLAlchemy are imported by the commands that change
# rules; `rules list` reads them with plain SQL (rules.listing), as the other reads do.

owner_option = click.option(
    "--owner", default=DEFAULT_OWNER, show_default=True, help="Whose rules these are."
)


@click.group("rules")
def rules_group() -> None:
    """The owner's rules: conditions matched on new mail, actions on whole conversations."""


@rules_group.command("add")
@click.option("--name", default=None, help="A name for the rule (default: its description).")
@click.option("--from", "from_", default=None, help="From address or name contains this.")
@click.option("--to", default=None, help="A To or Cc address or name contains this.")
@click.option("--subject", default=None, help="The subject contains this.")
@click.option("--list-id", default=None, help="The List-Id header contains this.")
@click.option("--text", default=None, help="Full-text search: every word must occur.")
@click.option("--label", "labels", multiple=True, help="Add this label (repeatable).")
@click.option("--archive", is_flag=True, help="Archive the conversation.")
@click.option("--trash", is_flag=True, help="Move the conversation to Trash.")
@click.option("--mark-read", is_flag=True, help="Mark the conversation read.")
@click.option("--star", is_flag=True, help="Star the matching message.")
@click.option(
    "--category",
    default=None,
    help="File into this tab (primary, promotions, social, updates, forums); "
    "only applied when the sender's authentication passed.",
)
@owner_option
@pass_app
@plain_errors
def add_command(
    app: AppContext,
    name: str | None,
    from_: str | None,
    to: str | None,
    subject: str | None,
    list_id: str | None,
    text: str | None,
    labels: tuple[str, ...],
    archive: bool,
    trash: bool,
    mark_read: bool,
    star: bool,
    category: str | None,
    owner: str,
) -> None:
    """Add a rule; it applies to mail that arrives from now on."""
    from mailroom.owners import get_or_create_user
    from mailroom.rules.model import parse_rule
    from mailroom.rules.service import add_rule

    conditions = {"from": from_, "to": to, "subject": subject, "list_id": list_id, "text": text}
    actions: list[dict[str, str]] = [{"type": "label", "label": label} for label in labels]
    for flag, kind in ((archive, "archive"), (trash, "trash"), (mark_read, "mark_read")):
        if flag:
            actions.append({"type": kind})
    if star:
        actions.append({"type": "star"})
    if category is not None:
        actions.append({"type": "category", "category": category})
    present = {k: v for k, v in conditions.items() if v is not None}
    spec = parse_rule(name or "rule", present, actions)
    if name is None:
        spec = parse_rule(spec.describe()[:200], present, actions)
    with app.store.session() as session:
        user = get_or_create_user(session, owner)
        rule_id = add_rule(session, user.id, spec)
    click.echo(f"Rule {rule_id} added: {spec.describe()}.")


@rules_group.command("list")
@owner_option
@format_option("text", "jsonl", "jsonl prints one JSON object per rule.")
@pass_app
@plain_errors
def list_command(app: AppContext, owner: str, output: str) -> None:
    """List the rules in the order they run."""
    from mailroom.reading import user_id
    from mailroom.rules.listing import list_rules

    reader = app.reader
    rules = list_rules(reader, user_id(reader, owner))
    if output == "jsonl":
        for rule in rules:
            echo_json(
                {
                    "id": rule.id,
                    "name": rule.spec.name if rule.spec else None,
                    "enabled": rule.enabled,
                    "conditions": rule.spec.conditions.as_json() if rule.spec else None,
                    "actions": rule.spec.actions_json() if rule.spec else None,
                    "problem": rule.problem,
                }
            )
        return
    if not rules:
        click.echo("No rules yet; add one with `mailroom rules add`.")
    for rule in rules:
        state = "" if rule.enabled else " (off)"
        if rule.spec is None:
            click.echo(f"{rule.id}{state}: skipped, {rule.problem}")
        else:
            description = rule.spec.describe()
            # An unnamed rule is named after its description: say it once, not twice.
            named = rule.spec.name not in (description, description[:200])
            label = f"{rule.spec.name}: " if named else ""
            click.echo(f"{rule.id}{state}: {label}{description}")


@rules_group.command("remove")
@click.argument("rule_id", type=int)
@owner_option
@pass_app
@plain_errors
def remove_command(app: AppContext, rule_id: int, owner: str) -> None:
    """Remove a rule by its id (see `mailroom rules list`)."""
    from mailroom.owners import get_user
    from mailroom.rules.service import remove_rule

    with app.existing_store.session() as session:
        user = get_user(session, owner)
        remove_rule(session, user.id, rule_id)
    click.echo(f"Rule {rule_id} removed.")
