"""``mailroom webhooks add|list|remove|enable|dead|replay|test``: webhooks for outside systems.

``add URL`` prints the endpoint's signing secret once (it is stored only
sealed with the master key); ``list`` shows endpoints without secrets;
``dead`` lists deliveries that gave up (10 attempts, or a 410 Gone);
``replay ID`` / ``replay --all-dead`` sends them again with the same event id;
``test ID`` POSTs a ``ping`` at once and says what the endpoint answered.
The engine's workers (``mailroom serve`` / ``mailroom worker``) deliver
everything else. The check a receiver does is in docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import click

from mailroom.cli.context import AppContext, echo_json, pass_app, plain_errors
from mailroom.config import DEFAULT_OWNER
from mailroom.webhooks.events import EVENT_TYPES


@click.group("webhooks")
def webhooks_group() -> None:
    """Signed webhooks: endpoints per user, the dead-letter list, replays and tests."""


def _user_id(app: AppContext, owner: str | None) -> int | None:
    if owner is None:
        return None
    from mailroom.reading import user_id

    return user_id(app.reader, owner)


class _Shown(Protocol):
    def as_json(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=_Shown)


def _show(items: list[S], as_json: bool, empty: str, line: Callable[[S], str]) -> None:
    """One JSON object per item, or one line each (``empty`` when there is none)."""
    if as_json:
        for item in items:
            echo_json(item.as_json())
        return
    if not items:
        click.echo(empty)
    for item in items:
        click.echo(line(item))


@webhooks_group.command("add")
@click.argument("url")
@click.option(
    "--events",
    default="all",
    show_default=True,
    help=f"Comma-separated event types: {', '.join(EVENT_TYPES)}.",
)
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="Whose events these are.")
@pass_app
@plain_errors
def add_command(app: AppContext, url: str, events: str, owner: str) -> None:
    """Add an endpoint and print its signing secret (shown this once only)."""
    from mailroom.owners import get_user
    from mailroom.webhooks.endpoints import add_endpoint
    from mailroom.webhooks.events import parse_event_types

    wanted = parse_event_types(events)
    with app.existing_store.session() as session:
        user = get_user(session, owner)
        endpoint_id, secret = add_endpoint(session, app.settings, user.id, url, wanted)
    click.echo(f"Webhook endpoint {endpoint_id} sends {len(wanted)} event type(s) to {url}.")
    click.echo(f"Signing secret (shown only now; keep it with the receiver): {secret}")


@webhooks_group.command("list")
@click.option("--owner", default=None, help="Only this user's endpoints.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per endpoint.")
@pass_app
@plain_errors
def list_command(app: AppContext, owner: str | None, as_json: bool) -> None:
    """List the endpoints (never their secrets)."""
    from mailroom.webhooks.listing import EndpointInfo, list_endpoints

    endpoints = list_endpoints(app.reader, _user_id(app, owner))

    def line(endpoint: EndpointInfo) -> str:
        state = "active" if endpoint.active else f"disabled: {endpoint.disabled_reason}"
        every = set(endpoint.events) == set(EVENT_TYPES)
        kinds = "all events" if every else ", ".join(endpoint.events)
        return f"{endpoint.id}  {endpoint.owner}  {endpoint.url}  ({kinds}; {state})"

    _show(endpoints, as_json, "No webhook endpoints.", line)


@webhooks_group.command("remove")
@click.argument("endpoint_id", metavar="ID", type=int)
@pass_app
@plain_errors
def remove_command(app: AppContext, endpoint_id: int) -> None:
    """Remove an endpoint with its deliveries."""
    from mailroom.webhooks.endpoints import remove_endpoint

    with app.existing_store.session() as session:
        remove_endpoint(session, endpoint_id)
    click.echo(f"Webhook endpoint {endpoint_id} removed.")


@webhooks_group.command("enable")
@click.argument("endpoint_id", metavar="ID", type=int)
@pass_app
@plain_errors
def enable_command(app: AppContext, endpoint_id: int) -> None:
    """Make an endpoint that was disabled (it answered 410 Gone) receive events again."""
    from mailroom.webhooks.endpoints import enable_endpoint

    with app.existing_store.session() as session:
        enable_endpoint(session, endpoint_id)
    click.echo(f"Webhook endpoint {endpoint_id} is active again.")


@webhooks_group.command("dead")
@click.option("--owner", default=None, help="Only this user's deliveries.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per delivery.")
@pass_app
@plain_errors
def dead_command(app: AppContext, owner: str | None, as_json: bool) -> None:
    """List the deliveries that gave up, with the last answer."""
    from mailroom.webhooks.listing import DeadEntry, dead_list

    entries = dead_list(app.reader, _user_id(app, owner))

    def line(entry: DeadEntry) -> str:
        answer = f"HTTP {entry.last_code}" if entry.last_code is not None else "no answer"
        return (
            f"{entry.id}  {entry.event_type}  {entry.event_id}  to {entry.url}  "
            f"{entry.attempts} attempt(s), last {answer}: {entry.last_error or '-'}"
        )

    _show(entries, as_json, "No dead webhook deliveries.", line)


@webhooks_group.command("replay")
@click.argument("delivery_id", metavar="DELIVERY_ID", type=int, required=False)
@click.option("--all-dead", is_flag=True, help="Every dead delivery of an active endpoint.")
@click.option("--owner", default=None, help="With --all-dead: only this user's deliveries.")
@pass_app
@plain_errors
def replay_command(
    app: AppContext, delivery_id: int | None, all_dead: bool, owner: str | None
) -> None:
    """Send a dead (or delivered) delivery again with the same event id."""
    from mailroom.errors import ConfigError
    from mailroom.store.models import utcnow
    from mailroom.webhooks.deliveries import replay, replay_all_dead

    if (delivery_id is None) == (not all_dead):
        raise ConfigError("Give either a DELIVERY_ID or --all-dead.")
    user_id = _user_id(app, owner)
    with app.existing_store.session() as session:
        if delivery_id is not None:
            replay(session, delivery_id, utcnow())
            click.echo(f"Webhook delivery {delivery_id} is queued again.")
            return
        count = replay_all_dead(session, utcnow(), user_id)
    click.echo(f"{count} dead webhook deliver{'y is' if count == 1 else 'ies are'} queued again.")


@webhooks_group.command("test")
@click.argument("endpoint_id", metavar="ID", type=int)
@pass_app
@plain_errors
def test_command(app: AppContext, endpoint_id: int) -> None:
    """POST a signed ping to an endpoint now and say what it answered."""
    from mailroom.store.models import utcnow
    from mailroom.webhooks.deliveries import make_ping
    from mailroom.webhooks.worker import WebhookWorker

    store = app.existing_store
    with store.session() as session:
        delivery_id = make_ping(session, endpoint_id, utcnow())
    worker = WebhookWorker(store, app.settings)
    try:
        attempt = worker.send_now(delivery_id)
    finally:
        worker.close()
    if attempt is not None and attempt.state == "delivered":
        click.echo(f"The endpoint accepted the ping (HTTP {attempt.code}).")
        return
    why = "another worker took it" if attempt is None else attempt.error or f"HTTP {attempt.code}"
    click.echo(
        f"The ping was not accepted ({why.rstrip('.')}); delivery {delivery_id} is retried "
        "by the workers.",
        err=True,
    )
    raise SystemExit(1)
