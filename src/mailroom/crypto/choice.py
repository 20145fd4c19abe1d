"""Which key wrapper this installation uses, from its settings.

``MAILROOM_KEY_WRAPPER=master`` (default) wraps data keys with the master
key; ``keyfile`` with the operator key file named by
``MAILROOM_KEY_WRAPPER_FILE``. A KMS wrapper would be one more name here.
"""

from __future__ import annotations

from mailroom.config import Settings
from mailroom.crypto.keyfile_wrapper import KeyFileWrapper
from mailroom.crypto.master_wrapper import MasterKeyWrapper
from mailroom.crypto.owner_secrets import OwnerSecretWrapper
from mailroom.crypto.wrapping import KeyWrapper
from mailroom.errors import ConfigError
from mailroom.secrets import _inside, load_master_key

WRAPPERS = ("master", "keyfile")


def wrapper_from_settings(settings: Settings) -> KeyWrapper:
    """The configured key wrapper; ConfigError in one sentence when it is not usable.

    With ``MAILROOM_OWNER_SECRETS_DIR`` set, it is wrapped in turn by the owners'
    secrets (:mod:`mailroom.crypto.owner_secrets`).
    """
    return with_owner_secrets(settings, _inner_wrapper(settings))


def with_owner_secrets(settings: Settings, wrapper: KeyWrapper) -> KeyWrapper:
    """``wrapper``, also sealing each data key under its owner's secret when so configured."""
    directory = settings.owner_secrets_dir
    if directory is None:
        return wrapper
    if _inside(directory, settings.data_dir):
        raise ConfigError(
            f"The owner secrets directory {directory} lies inside the data dir "
            f"{settings.data_dir}; move it elsewhere, or a backup of the data would carry it."
        )
    return OwnerSecretWrapper(wrapper, directory.expanduser())


def _inner_wrapper(settings: Settings) -> KeyWrapper:
    kind = settings.key_wrapper.strip().lower()
    if kind == "master":
        return MasterKeyWrapper(load_master_key(settings))
    if kind == "keyfile":
        path = settings.key_wrapper_file
        if path is None:
            raise ConfigError(
                "MAILROOM_KEY_WRAPPER=keyfile needs MAILROOM_KEY_WRAPPER_FILE, "
                "the operator key file."
            )
        if _inside(path, settings.data_dir):
            raise ConfigError(
                f"The key file {path} lies inside the data dir {settings.data_dir}; move it "
                "elsewhere so a copy of the data alone cannot open the data keys."
            )
        return KeyFileWrapper.from_file(path)
    raise ConfigError(
        f"MAILROOM_KEY_WRAPPER={settings.key_wrapper!r} is not known; use master or keyfile."
    )
