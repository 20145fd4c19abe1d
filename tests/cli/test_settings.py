"""Settings: environment over ./.env over defaults, flags over both, plain errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mailroom.config import SecretStr, Settings, load_settings
from mailroom.errors import ConfigError


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No MAILROOM_* variable set, and a working directory without a .env."""
    import os

    for key in list(os.environ):
        if key.upper().startswith("MAILROOM_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_environment_values_are_converted_by_type(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("MAILROOM_DATA_DIR", "~/mail-data")
    clean_env.setenv("MAILROOM_SIGNIN_MAX_FAILURES", " 12 ")
    clean_env.setenv("MAILROOM_WATCH_LEASE_TTL", "2.5")
    clean_env.setenv("mailroom_master_key", "sekrit")  # names are read in any case
    clean_env.setenv("MAILROOM_MASTER_KEY_FILE", "")  # empty optional: not set
    settings = load_settings()
    assert settings.data_dir == Path("~/mail-data").expanduser()
    assert settings.signin_max_failures == 12
    assert settings.watch_lease_ttl == 2.5
    assert settings.master_key is not None and settings.master_key.get_secret_value() == "sekrit"
    assert "sekrit" not in repr(settings)
    assert settings.master_key_file is None
    assert settings.resolved_database_url == f"sqlite:///{settings.data_dir}/mailroom.sqlite3"


def test_dotenv_is_read_and_the_environment_and_flags_win(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text(
        "# the demo store\nexport MAILROOM_DATA_DIR='/from/dotenv'\n"
        'MAILROOM_NAMESPACE="dotenv"\nMAILROOM_CORS_ORIGINS=https://a.example, https://b.example\n'
        "OTHER_TOOL=ignored\n",
        encoding="utf-8",
    )
    assert load_settings().data_dir == Path("/from/dotenv")
    clean_env.setenv("MAILROOM_NAMESPACE", "environment")
    settings = load_settings(data_dir=Path("/from/flag"), database_url=None)
    assert settings.data_dir == Path("/from/flag")
    assert settings.namespace == "environment"
    assert settings.cors_origin_list == ["https://a.example", "https://b.example"]


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("MAILROOM_SIGNIN_MAX_FAILURES", "ten", "'ten' is not a whole number"),
        ("MAILROOM_WATCH_LEASE_TTL", "soon", "'soon' is not a number"),
        ("MAILROOM_WEB_SESSION_DAYS", "", "'' is not a whole number"),
    ],
)
def test_a_bad_value_is_one_sentence_naming_the_variable(
    clean_env: pytest.MonkeyPatch, variable: str, value: str, reason: str
) -> None:
    clean_env.setenv(variable, value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert (
        str(error.value) == f"The setting {variable} is invalid ({reason}); fix it and try again."
    )


def test_settings_built_in_code_take_text_and_objects(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, master_key="k", watch_lease_ttl=3)  # type: ignore[arg-type]
    assert settings.master_key == SecretStr("k") and settings.watch_lease_ttl == 3.0
    changed = dataclasses.replace(settings, allowed_private_hosts="127.0.0.1, 10.0.0.0/8")
    assert changed.allowed_private_host_list == ["127.0.0.1", "10.0.0.0/8"]
    with pytest.raises(ConfigError, match="MAILROOM_SIGNIN_MAX_FAILURES is invalid"):
        Settings(data_dir=tmp_path, signin_max_failures=True)
