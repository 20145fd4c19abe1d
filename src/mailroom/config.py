"""Settings from the environment (and a `.env` file), overridable by CLI flags.

``MAILROOM_DATA_DIR``      where mailroom keeps its SQLite store and state
                           (default: the OS data dir for the user).
``MAILROOM_DATABASE_URL``  SQLAlchemy URL; default is a SQLite file in the data
                           dir, ``postgresql+psycopg://...`` for PostgreSQL.
``MAILROOM_MASTER_KEY``    the key that encrypts account credentials at rest
                           (``mailroom keys init`` prints one); or
``MAILROOM_MASTER_KEY_FILE`` a file holding it, which must lie outside the data dir.
``MAILROOM_ALLOWED_PRIVATE_HOSTS``  operator allow-list (comma-separated host
                           names, addresses or networks) of mail servers that may
                           resolve to loopback/private addresses (SSRF guard).
``MAILROOM_SIGNIN_MAX_FAILURES`` / ``..._PER_ADDRESS`` / ``MAILROOM_SIGNIN_LOCKOUT_MINUTES``
                           the sign-in lock-out (10 per name, 30 per address, in
                           15 minutes); ``MAILROOM_WEB_SESSION_DAYS`` (30) how
                           long a web sign-in lasts.
``MAILROOM_CORS_ORIGINS``  web pages (comma-separated origins such as
                           ``https://webmail.example.org``) that may use JMAP from
                           another site; any other Origin is refused (403).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import platformdirs
from pydantic import SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mailroom.errors import ConfigError


class Settings(BaseSettings):
    """All runtime settings of mailroom."""

    model_config = SettingsConfigDict(env_prefix="MAILROOM_", env_file=".env", extra="ignore")

    data_dir: Path = Path(platformdirs.user_data_dir("mailroom"))
    database_url: str | None = None
    redis_url: str | None = None  # MAILROOM_REDIS_URL: queues and watch leases for many machines
    namespace: str = "mailroom"  # prefix of queue names and lease keys in a shared Redis
    watch_lease_ttl: float = 90.0  # seconds; renewed every third of it
    changelog_retention_days: int = 30  # older change rows are pruned (JMAP: cannotCalculate)
    master_key: SecretStr | None = None
    master_key_file: Path | None = None
    allowed_private_hosts: str = ""
    # Sign-in lock-out (web and JMAP Basic): failures allowed per user name and per
    # client address within the window before password sign-ins are refused (429).
    signin_max_failures: int = 10
    signin_max_failures_per_address: int = 30
    signin_lockout_minutes: int = 15
    web_session_days: int = 30  # a web sign-in lasts this long, then asks again
    cors_origins: str = ""  # MAILROOM_CORS_ORIGINS: origins of web JMAP clients (CORS)

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("master_key_file")
    @classmethod
    def _expand_key_file(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @property
    def allowed_private_host_list(self) -> list[str]:
        """The operator's SSRF allow-list, one entry per host name, address or network."""
        return [part for part in self.allowed_private_hosts.replace(",", " ").split() if part]

    @property
    def cors_origin_list(self) -> list[str]:
        """The origins whose web pages may use JMAP (``scheme://host[:port]`` each)."""
        return [part for part in self.cors_origins.replace(",", " ").split() if part]

    @property
    def resolved_database_url(self) -> str:
        """The database URL in force: the configured one or the SQLite default."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'mailroom.sqlite3'}"


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment; non-None keyword arguments win (CLI flags)."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]).upper()
        raise ConfigError(
            f"The setting MAILROOM_{field} is invalid ({first['msg']}); fix it and try again."
        ) from None
