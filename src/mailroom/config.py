"""Settings from the environment (and a `.env` file), overridable by CLI flags.

``MAILROOM_DATA_DIR``      where mailroom keeps its SQLite store and state
                           (default: the OS data dir for the user).
``MAILROOM_DATABASE_URL``  SQLAlchemy URL; default is a SQLite file in the data
                           dir, ``postgresql+psycopg://...`` for PostgreSQL.
``MAILROOM_MASTER_KEY``    the key that encrypts account credentials at rest
                           (``mailroom keys init`` prints one); or
``MAILROOM_MASTER_KEY_FILE`` a file holding it, which must lie outside the data dir.
``MAILROOM_KEY_WRAPPER``   what wraps each owner's data key: ``master`` (default) or
                           ``keyfile`` with ``MAILROOM_KEY_WRAPPER_FILE`` (an operator key
                           file of named key versions, outside the data dir).
``MAILROOM_ENCRYPT_MAIL``  ``1`` seals new mail (bodies, raw messages, search words) under
                           each owner's data key; mail sealed before stays readable when off.
``MAILROOM_ALLOWED_PRIVATE_HOSTS``  operator allow-list (comma-separated host
                           names, addresses or networks) of mail servers that may
                           resolve to loopback/private addresses (SSRF guard).
``MAILROOM_SIGNIN_MAX_FAILURES`` / ``..._PER_ADDRESS`` / ``MAILROOM_SIGNIN_LOCKOUT_MINUTES``
                           the sign-in lock-out (10 per name, 30 per address, in
                           15 minutes); ``MAILROOM_WEB_SESSION_DAYS`` (30) how
                           long a web sign-in lasts; ``MAILROOM_WEB_UNDO_SECONDS``
                           (10) how long mail sent from the web page can be undone.
``MAILROOM_ADMINS``        the users (comma-separated names) who see the web admin page
                           (``/admin``: queue depths, failed sends, accounts in error).
``MAILROOM_CORS_ORIGINS``  web pages (comma-separated origins such as
                           ``https://webmail.example.org``) that may use JMAP from
                           another site; any other Origin is refused (403).
``MAILROOM_PUSH_ALLOW_HTTP`` ``1`` lets JMAP push subscriptions use plain http
                           URLs (for test receivers; https is required otherwise).
``MAILROOM_LANE_RATES``    the pace of the throttled sending lanes, messages per minute
                           and burst: ``urgent=120/20,calm=30/5`` (the default; ``direct``
                           is never throttled). ``MAILROOM_LANE_KINDS`` maps kinds of mail
                           to lanes (``password_reset=urgent,invoice=urgent,personal=urgent,
                           newsletter=calm``: ``personal`` is what a person sends from the web
                           page or a JMAP client;
                           an unknown kind goes ``calm``). ``MAILROOM_PACING=off`` throttles
                           no lane: every lane then retries like ``direct`` (SPEC §11).
``MAILROOM_SUBMISSION_LISTEN`` where ``mailroom serve`` opens the SMTP submission
                           port for mail programs (``127.0.0.1:8587``; ``off`` closes it);
                           ``MAILROOM_SUBMISSION_MAX_BYTES`` the largest message it takes (25 MiB).
``MAILROOM_ASSISTANT``      which model sorts mail for owners who switch it on: ``off``
                           (default), ``openai`` (``MAILROOM_ASSISTANT_URL``, ``_MODEL``,
                           ``_KEY``, ``_TIMEOUT``) or ``offline``; ``MAILROOM_HOLD_MAX_SECONDS``
                           (60, 2–300) the longest new mail waits for its verdict.
``MAILROOM_METRICS_ALLOW``  who may scrape ``/metrics`` (addresses or networks,
                           comma-separated; ``127.0.0.1, ::1``); ``MAILROOM_METRICS_TOKEN``,
                           when set, a bearer token every scrape must carry;
                           ``MAILROOM_METRICS_LISTEN`` (``HOST:PORT``, off) where ``mailroom
                           worker`` and ``supervisor`` answer scrapes.
``MAILROOM_GOOGLE_CLIENT_ID`` / ``_CLIENT_SECRET_FILE`` and ``MAILROOM_MICROSOFT_CLIENT_ID`` /
                           ``_CLIENT_SECRET_FILE`` / ``_TENANT`` (common): the OAuth web clients
                           behind the accounts page's Connect buttons (redirect URI
                           ``https://HOST/accounts/oauth/callback``); ``MAILROOM_GOOGLE_OAUTH_URL``
                           / ``MAILROOM_MICROSOFT_OAUTH_URL`` another authorization server.
``MAILROOM_SEND_UNDO_SECONDS`` how long a JMAP EmailSubmission waits, cancellable, before
                           its lane may send it (0); ``MAILROOM_SEND_MAX_DELAY_SECONDS`` the
                           longest FUTURERELEASE hold (30 days; 0 allows none);
                           ``MAILROOM_SEND_MAX_RECIPIENTS`` recipients per message (100).

Every field of :class:`Settings` is ``MAILROOM_<FIELD>`` (any case). A keyword
given to :func:`load_settings` (a CLI flag) wins over the environment, the
environment over ``./.env``, ``./.env`` over the default.

The loader is a dataclass read by hand rather than pydantic-settings: every
command reads the settings first, and importing pydantic-settings cost a read
command a fifth of its start-up. Values are converted by the field's type
(text, path, whole number, number, secret); a value that does not convert is
one plain sentence naming the variable.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mailroom.errors import ConfigError

ENV_PREFIX = "MAILROOM_"
ENV_FILE = ".env"
DEFAULT_OWNER = "me"  # the user a command acts for without --owner


class SecretStr:
    """A secret that never shows in a repr, a log line or a traceback."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        """The secret itself, for the one place that needs it."""
        return self._value

    def __repr__(self) -> str:
        return "SecretStr('**********')"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretStr) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def default_data_dir() -> Path:
    """The OS data dir of the user (``~/.local/share/mailroom`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("mailroom"))


@dataclass
class Settings:
    """All runtime settings of mailroom; strings given for typed fields are converted."""

    data_dir: Path = field(default_factory=default_data_dir)
    database_url: str | None = None
    redis_url: str | None = None  # MAILROOM_REDIS_URL: queues and watch leases for many machines
    namespace: str = "mailroom"  # prefix of queue names and lease keys in a shared Redis
    watch_lease_ttl: float = 90.0  # seconds; renewed every third of it
    changelog_retention_days: int = 30  # older change rows are pruned (JMAP: cannotCalculate)
    audit_retention_days: int = 365  # older audit_log rows are deleted; 0 keeps them forever
    master_key: SecretStr | None = None
    master_key_file: Path | None = None
    # What wraps owners' data keys (mailroom.crypto.choice): ``master`` (the master key
    # above) or ``keyfile`` (an operator's versioned key file, KMS style, at the path below).
    key_wrapper: str = "master"
    key_wrapper_file: Path | None = None
    # A directory outside the data dir holding one secret per owner that every data key is
    # also wrapped with (crypto.owner_secrets): deleting an owner then reaches old backups too.
    owner_secrets_dir: Path | None = None
    # MAILROOM_ENCRYPT_MAIL=1: new mail is sealed under its owner's data key (crypto.sealing)
    encrypt_mail: int = 0
    allowed_private_hosts: str = ""
    # Sign-in lock-out (web and JMAP Basic): failures allowed per user name and per
    # client address within the window before password sign-ins are refused (429).
    signin_max_failures: int = 10
    signin_max_failures_per_address: int = 30
    signin_lockout_minutes: int = 15
    web_session_days: int = 30  # a web sign-in lasts this long, then asks again
    web_undo_seconds: int = 10  # the web page's undo-send window (at least the JMAP one)
    admins: str = ""  # MAILROOM_ADMINS: user names of the operators (the web admin page)
    cors_origins: str = ""  # MAILROOM_CORS_ORIGINS: origins of web JMAP clients (CORS)
    # MAILROOM_PUSH_ALLOW_HTTP=1: JMAP push subscriptions may use http URLs (test set-ups
    # only; the receiver must still pass the SSRF guard and its allow-list).
    push_allow_http: int = 0
    # Sending (mailroom.outbound; the module docstring above has the formats).
    lane_rates: str = "urgent=120/20,calm=30/5"
    lane_kinds: str = "password_reset=urgent,invoice=urgent,personal=urgent,newsletter=calm"
    pacing: str = "on"
    # The SMTP submission port of `mailroom serve` (mailroom.outbound.submission_port).
    submission_listen: str = "127.0.0.1:8587"
    submission_max_bytes: int = 25 * 1024 * 1024
    # JMAP EmailSubmission (mailroom.jmap.submission_policy): the undo window every
    # submission waits in, the longest FUTURERELEASE hold, recipients per message.
    send_undo_seconds: int = 0
    send_max_delay_seconds: int = 30 * 86400
    send_max_recipients: int = 100
    # Who may scrape /metrics (mailroom.metrics.access): addresses or networks, and a
    # bearer token that, when set, every scrape must carry.
    metrics_allow: str = "127.0.0.1, ::1"
    metrics_token: SecretStr | None = None
    metrics_listen: str = ""  # HOST:PORT of a worker's or supervisor's own /metrics (off)
    # The assistant (mailroom.assistant; docs/operations.md): which model sorts the mail
    # of owners who switch it on (``off``, ``openai`` for an OpenAI-compatible endpoint,
    # ``offline`` for the bundled embedding model), the endpoint's URL, model name and key,
    # the longest wait for one answer, and how long new mail may be held for a verdict.
    assistant: str = "off"
    assistant_url: str = ""
    assistant_model: str = ""
    assistant_key: SecretStr | None = None
    assistant_timeout: float = 30.0
    hold_max_seconds: int = 60
    # The web accounts page's "Connect Gmail / Microsoft" buttons (mailroom.oauth.web): the
    # operator's OAuth web clients, registered with the redirect URI
    # https://HOST/accounts/oauth/callback, and another authorization server with the same
    # paths for each (an emulator, a national cloud; empty: Google's and Microsoft's own).
    google_client_id: str = ""
    google_client_secret_file: Path | None = None
    google_oauth_url: str = ""
    microsoft_client_id: str = ""
    microsoft_client_secret_file: Path | None = None
    microsoft_tenant: str = "common"
    microsoft_oauth_url: str = ""

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            setattr(self, item.name, _convert(item, getattr(self, item.name)))

    @property
    def allowed_private_host_list(self) -> list[str]:
        """The operator's SSRF allow-list, one entry per host name, address or network."""
        return [part for part in self.allowed_private_hosts.replace(",", " ").split() if part]

    @property
    def admin_list(self) -> list[str]:
        """The user names of the operators, who see the web admin page."""
        return [part for part in self.admins.replace(",", " ").split() if part]

    @property
    def cors_origin_list(self) -> list[str]:
        """The origins whose web pages may use JMAP (``scheme://host[:port]`` each)."""
        return [part for part in self.cors_origins.replace(",", " ").split() if part]

    @property
    def lane_rate_map(self) -> dict[str, LaneRate]:
        """The pace of each throttled lane (urgent, calm): the defaults, then the setting."""
        rates = dict(DEFAULT_LANE_RATES)
        for name, value in _pairs(self.lane_rates, "lane_rates"):
            rates[_throttled_lane(name.lower())] = _lane_rate(name, value)
        return rates

    @property
    def lane_kind_map(self) -> dict[str, str]:
        """Kind of mail -> lane name (checked when a message is queued, by ``lane_for``)."""
        return {kind: lane.lower() for kind, lane in _pairs(self.lane_kinds, "lane_kinds")}

    @property
    def pacing_enabled(self) -> bool:
        """False when the operator switched pacing off (``MAILROOM_PACING=off``)."""
        value = self.pacing.strip().lower()
        if value not in _SWITCH:
            raise _invalid("pacing", f"{self.pacing!r} is not on or off")
        return _SWITCH[value]

    @property
    def resolved_database_url(self) -> str:
        """The database URL in force: the configured one or the SQLite default."""
        if self.database_url:
            return self.database_url
        # Percent-encoded: a '?' or '#' in the data dir would otherwise end the path.
        path = quote(str(self.data_dir / "mailroom.sqlite3"), safe="/")
        return f"sqlite:///{path}"


@dataclass(frozen=True)
class LaneRate:
    """The pace of one throttled lane: messages per minute, and how many may leave at once."""

    per_minute: float
    burst: int


DEFAULT_LANE_RATES = {"urgent": LaneRate(120.0, 20), "calm": LaneRate(30.0, 5)}
_SWITCH = {"on": True, "1": True, "true": True, "yes": True}
_SWITCH.update({"off": False, "0": False, "false": False, "no": False})


def _pairs(text: str, setting: str) -> list[tuple[str, str]]:
    """``"a=1, b=2"`` -> ``[("a", "1"), ("b", "2")]``; a part without ``=`` is invalid."""
    pairs: list[tuple[str, str]] = []
    for part in text.replace(";", ",").split(","):
        if not part.strip():
            continue
        name, sign, value = part.partition("=")
        if not sign or not name.strip() or not value.strip():
            raise _invalid(setting, f"{part.strip()!r} is not NAME=VALUE")
        pairs.append((name.strip(), value.strip()))
    return pairs


def _throttled_lane(name: str) -> str:
    if name not in DEFAULT_LANE_RATES:
        reason = "the direct lane is never throttled" if name == "direct" else "no such lane"
        raise _invalid("lane_rates", f"{name!r}: {reason}; the throttled lanes are urgent, calm")
    return name


def _lane_rate(name: str, value: str) -> LaneRate:
    per_minute, slash, burst = value.partition("/")
    try:
        rate = LaneRate(float(per_minute), int(burst) if slash else 1)
    except ValueError:
        rate = LaneRate(0.0, 0)
    if not rate.per_minute > 0 or rate.burst < 1 or rate.per_minute == float("inf"):
        raise _invalid("lane_rates", f"{name}={value!r} is not PER_MINUTE/BURST such as 30/5")
    return rate


# Field type (annotations are strings under `from __future__`) -> (parse text, Python type, words).
_KINDS: dict[str, tuple[Any, type, str]] = {
    "Path": (lambda text: Path(text).expanduser(), Path, "a path"),
    "str": (str, str, "text"),
    "int": (int, int, "a whole number"),
    "float": (float, float, "a number"),
    "SecretStr": (SecretStr, SecretStr, "text"),
}


def _convert(item: dataclasses.Field[Any], value: Any) -> Any:
    """``value`` as the field's type: text from the environment is parsed, objects checked."""
    kind, _, rest = str(item.type).partition(" | ")
    parse, python_type, words = _KINDS[kind]
    if value is None:
        if rest == "None":
            return None
        raise _invalid(item.name, "it must be set")
    if isinstance(value, str):
        text = value.strip() if kind in ("int", "float") else value
        if rest == "None" and kind != "str" and not text.strip():
            return None
        try:
            return parse(text)
        except ValueError:
            raise _invalid(item.name, f"{value!r} is not {words}") from None
    if kind == "Path" and isinstance(value, Path):
        return value.expanduser()
    if kind == "float" and type(value) is int:
        return float(value)
    if type(value) is python_type:
        return value
    raise _invalid(item.name, f"{value!r} is not {words}")


def _invalid(name: str, reason: str) -> ConfigError:
    return ConfigError(
        f"The setting {ENV_PREFIX}{name.upper()} is invalid ({reason}); fix it and try again."
    )


def _environment(names: set[str]) -> dict[str, str]:
    """``MAILROOM_*`` values for ``names``: the process environment over ``./.env``."""
    found: dict[str, str] = {}
    if Path(ENV_FILE).is_file():
        from dotenv import dotenv_values

        for key, value in dotenv_values(ENV_FILE).items():
            name = key.upper().removeprefix(ENV_PREFIX).lower()
            if key.upper().startswith(ENV_PREFIX) and name in names and value is not None:
                found[name] = value
    for key, value in os.environ.items():
        name = key.upper().removeprefix(ENV_PREFIX).lower()
        if key.upper().startswith(ENV_PREFIX) and name in names:
            found[name] = value
    return found


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment; non-None keyword arguments win (CLI flags)."""
    names = {item.name for item in dataclasses.fields(Settings)}
    values: dict[str, Any] = _environment(names)
    values.update({key: value for key, value in overrides.items() if value is not None})
    return Settings(**values)
