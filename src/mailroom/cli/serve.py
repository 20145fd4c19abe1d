"""``mailroom serve``: the HTTP server — health, the web page and JMAP.

By default it also runs the engine in the same process (the embedded
default): a consumer for every queue and the watch supervisor with its
periodic duties. ``--no-jobs`` serves HTTP only, for deployments that run
``mailroom worker`` and ``mailroom supervisor`` separately (its actions still
enqueue their propagation right after they commit).

``--tls-cert`` and ``--tls-key`` (PEM files, given together) switch to
https, which some JMAP clients insist on. On Ctrl-C open push streams end
at once (and any other request gets a few seconds) instead of holding the
shutdown.

It also opens the SMTP submission port for mail programs
(:mod:`mailroom.outbound.submission_port`) on ``MAILROOM_SUBMISSION_LISTEN``
(``127.0.0.1:8587``), with STARTTLS on the same certificate and the same
sign-in lock-out as the web page and JMAP (one :class:`Authenticator`).
``--submission-port HOST:PORT`` moves it, ``--no-submission-port`` closes it.
A port given that way that cannot be opened stops ``serve``; the default
one, when something else holds it, is left out with a warning, so HTTP is
still served.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.errors import ConfigError

if TYPE_CHECKING:
    from mailroom.jmap.auth import Authenticator
    from mailroom.outbound.submission_port import SubmissionPort

SHUTDOWN_GRACE_SECONDS = 3


def check_tls(cert: Path | None, key: Path | None) -> None:
    """Both or neither, readable, and a usable certificate/key pair; else a ConfigError."""
    if cert is None and key is None:
        return
    if cert is None or key is None:
        raise ConfigError("Give both --tls-cert and --tls-key to serve over https.")
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.is_file():
            raise ConfigError(f"The {flag} file {path} does not exist.")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(str(cert), str(key))
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror or "unreadable"
        raise ConfigError(
            f"The certificate {cert} and key {key} cannot be used ({reason}); "
            "give a PEM certificate and its matching private key."
        ) from None


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8025, show_default=True)
@click.option(
    "--owner",
    default=None,
    hidden=True,
    help="Deprecated and ignored: the web page shows the mail of whoever signs in.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate (chain) to serve https; needs --tls-key.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM private key of --tls-cert.",
)
@click.option(
    "--submission-port",
    "submission_listen",
    metavar="HOST:PORT",
    default=None,
    help="Where mail programs send (SMTP submission); default MAILROOM_SUBMISSION_LISTEN "
    "or 127.0.0.1:8587.",
)
@click.option("--no-submission-port", is_flag=True, help="Open no SMTP submission port.")
@click.option(
    "--no-jobs",
    is_flag=True,
    help="Serve HTTP only; run `mailroom worker` and `mailroom supervisor` separately.",
)
@pass_app
@plain_errors
def serve_command(
    app: AppContext,
    host: str,
    port: int,
    owner: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    submission_listen: str | None,
    no_submission_port: bool,
    no_jobs: bool,
) -> None:
    """Serve the web page, JMAP (/.well-known/jmap), /health, /ready and /metrics."""
    import uvicorn

    from mailroom.jmap.app import JmapConfig
    from mailroom.web.app import create_app

    check_tls(tls_cert, tls_key)
    from mailroom.metrics.access import ScrapeAccess

    ScrapeAccess.from_settings(app.settings)  # a bad MAILROOM_METRICS_ALLOW stops serve now
    from mailroom.jmap.auth import Authenticator, SignInLimiter, lockout_policy
    from mailroom.jmap.push_policy import PushPolicy
    from mailroom.jmap.submission_policy import SubmissionPolicy
    from mailroom.outbound.submission_port import DEFAULT_LISTEN, parse_listen

    if submission_listen and no_submission_port:
        raise ConfigError("Give either --submission-port or --no-submission-port, not both.")
    listen_text = submission_listen or app.settings.submission_listen
    listen = None if no_submission_port else parse_listen(listen_text)

    jmap = JmapConfig(
        cors_origins=tuple(app.settings.cors_origin_list),
        push=PushPolicy(
            allow_http=bool(app.settings.push_allow_http),
            allowed_private_hosts=tuple(app.settings.allowed_private_host_list),
        ),
        submission=SubmissionPolicy(app.settings),  # queue_message's settings, undo window
    )
    if owner is not None:
        click.echo(
            "--owner is no longer used: the web page shows the mail of whoever signs in "
            "(set a password with `mailroom user add NAME --password-stdin`).",
            err=True,
        )
    # One authenticator: wrong passwords on the submission port count like web ones.
    auth = Authenticator(app.store, SignInLimiter(app.store, lockout_policy(app.settings)))
    web = create_app(app.store, jmap=jmap, settings=app.settings, auth=auth)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            jmap.stopping.set()  # end push streams instead of waiting for them
            super().handle_exit(sig, frame)

    scheme = "https" if tls_cert else "http"
    click.echo(f"mailroom is serving on {scheme}://{host}:{port}/ (Ctrl-C stops it).")
    click.echo(f"JMAP clients connect to {scheme}://{host}:{port}/.well-known/jmap")
    config = uvicorn.Config(
        web,
        host=host,
        port=port,
        log_level="warning",
        ssl_certfile=str(tls_cert) if tls_cert else None,
        ssl_keyfile=str(tls_key) if tls_key else None,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )
    from mailroom.jobs.runtime import Runtime

    # Also with --no-jobs: actions taken here enqueue their propagation after commit.
    runtime = Runtime(app.store, app.settings)
    submission = None
    if listen is not None:
        explicit = bool(submission_listen) or listen_text != DEFAULT_LISTEN
        submission = open_submission_port(app, listen, tls_cert, tls_key, auth, explicit=explicit)
    if not no_jobs:
        runtime.start_consumers()
        runtime.start_supervisor()
    try:
        Server(config).run()
    finally:
        if submission is not None:
            submission.stop()
        runtime.stop()


def open_submission_port(
    app: AppContext,
    listen: tuple[str, int],
    cert: Path | None,
    key: Path | None,
    auth: Authenticator,
    *,
    explicit: bool,
) -> SubmissionPort | None:
    """The started submission port; None (with a warning) when the default one is taken."""
    from mailroom.outbound.submission_port import SubmissionPort

    tls = None
    if cert is not None and key is not None:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(str(cert), str(key))
    host, number = listen
    port = SubmissionPort(app.store, app.settings, host=host, port=number, tls=tls, auth=auth)
    try:
        port.start()
    except ConfigError as exc:
        if explicit:
            raise
        click.echo(f"mailroom: {exc} Until then mailroom serves without it.", err=True)
        return None
    where = f"[{host}]:{number}" if ":" in host else f"{host}:{number}"
    how = "STARTTLS and AUTH" if tls else "AUTH from this machine only, no TLS"
    click.echo(f"Mail programs send through {where} (SMTP submission, {how}).")
    return port
