"""The key wrappers: round trip, context binding, key-file versions, the configured choice."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.config import Settings
from mailroom.crypto import KeyFileWrapper, MasterKeyWrapper, wrapper_from_settings
from mailroom.errors import ConfigError

KEY = os.urandom(32)


@settings(max_examples=50, deadline=None)
@given(data_key=st.binary(min_size=32, max_size=32), owner=st.integers(1, 10**9))
def test_master_wrapper_round_trips_and_binds_the_context(data_key: bytes, owner: int) -> None:
    """A wrapped key opens for its own owner and version only."""
    wrapper = MasterKeyWrapper(KEY)
    wrapped = wrapper.wrap(data_key, f"owner:{owner}:key:1")
    assert data_key not in wrapped
    assert wrapper.unwrap(wrapped, f"owner:{owner}:key:1") == data_key
    with pytest.raises(ConfigError, match="cannot be opened"):
        wrapper.unwrap(wrapped, f"owner:{owner + 1}:key:1")
    with pytest.raises(ConfigError, match="cannot be opened"):
        wrapper.unwrap(wrapped, f"owner:{owner}:key:2")


def test_another_master_key_does_not_open_and_says_so() -> None:
    """A wrong master key is one sentence, not a traceback; the ids differ."""
    wrapped = MasterKeyWrapper(KEY).wrap(b"k" * 32, "owner:1:key:1")
    other = MasterKeyWrapper(os.urandom(32))
    assert other.key_id != MasterKeyWrapper(KEY).key_id
    with pytest.raises(ConfigError, match="configured key"):
        other.unwrap(wrapped, "owner:1:key:1")


def _line(name: str) -> str:
    return f"{name} {base64.urlsafe_b64encode(os.urandom(32)).decode()}\n"


def test_key_file_wraps_with_its_newest_version_and_opens_older_ones(tmp_path: Path) -> None:
    """Appending a version keeps keys wrapped by the older one readable; removing it does not."""
    path = tmp_path / "kms.keys"
    first = _line("2026-01")
    path.write_text("# operator keys\n" + first)
    old = KeyFileWrapper.from_file(path).wrap(b"a" * 32, "owner:1:key:1")
    second = _line("2026-12")
    path.write_text(first + second)
    both = KeyFileWrapper.from_file(path)
    assert both.key_id == "keyfile:2026-12"
    assert both.unwrap(old, "owner:1:key:1") == b"a" * 32
    assert b"2026-12" in both.wrap(b"b" * 32, "owner:1:key:2")
    path.write_text(second)
    with pytest.raises(ConfigError, match="no longer holds"):
        KeyFileWrapper.from_file(path).unwrap(old, "owner:1:key:1")


def test_a_bad_key_file_is_one_sentence(tmp_path: Path) -> None:
    """A line that is no 'NAME KEY', an empty file and a missing file are plain errors."""
    path = tmp_path / "kms.keys"
    path.write_text("only-a-name\n")
    with pytest.raises(ConfigError, match="Line 1 of the key file"):
        KeyFileWrapper.from_file(path)
    path.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no key"):
        KeyFileWrapper.from_file(path)
    with pytest.raises(ConfigError, match="cannot be read"):
        KeyFileWrapper.from_file(tmp_path / "missing")


def test_the_wrapper_is_chosen_by_settings(tmp_path: Path) -> None:
    """master (default) uses the master key; keyfile the operator file; others are refused."""
    master = base64.urlsafe_b64encode(KEY).decode()
    data = tmp_path / "data"
    chosen = wrapper_from_settings(Settings(data_dir=data, master_key=master))
    assert chosen.key_id == MasterKeyWrapper(KEY).key_id
    keys = tmp_path / "kms.keys"
    keys.write_text(_line("v1"))
    chosen = wrapper_from_settings(
        Settings(data_dir=data, key_wrapper="keyfile", key_wrapper_file=keys)
    )
    assert chosen.key_id == "keyfile:v1"
    with pytest.raises(ConfigError, match="needs MAILROOM_KEY_WRAPPER_FILE"):
        wrapper_from_settings(Settings(data_dir=data, key_wrapper="keyfile"))
    with pytest.raises(ConfigError, match="inside the data dir"):
        inside = data / "kms.keys"
        wrapper_from_settings(
            Settings(data_dir=data, key_wrapper="keyfile", key_wrapper_file=inside)
        )
    with pytest.raises(ConfigError, match="is not known"):
        wrapper_from_settings(Settings(data_dir=data, key_wrapper="vault"))
