"""``mailroom serve``: the HTTP server (health, web page; JMAP when it lands)."""

from __future__ import annotations

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.owners import DEFAULT_OWNER


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8025, show_default=True)
@click.option(
    "--owner", default=DEFAULT_OWNER, show_default=True, help="Whose mail the page shows."
)
@pass_app
@plain_errors
def serve_command(app: AppContext, host: str, port: int, owner: str) -> None:
    """Serve the web page and /health until interrupted."""
    import uvicorn

    from mailroom.web.app import create_app

    web = create_app(app.store, owner=owner)
    click.echo(f"mailroom is serving on http://{host}:{port}/ (Ctrl-C stops it).")
    uvicorn.run(web, host=host, port=port, log_level="warning")
