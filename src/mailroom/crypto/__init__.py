"""Privacy at rest: owners' data keys (envelope encryption), field encryption, key rotation.

* :mod:`~mailroom.crypto.wrapping` — the ``KeyWrapper`` protocol; the master key
  (:mod:`~mailroom.crypto.master_wrapper`) and an operator key file
  (:mod:`~mailroom.crypto.keyfile_wrapper`) implement it, chosen by
  :mod:`~mailroom.crypto.choice`.
* :mod:`~mailroom.crypto.datakeys` — one data key per owner and version, stored wrapped.
* :mod:`~mailroom.crypto.fields` — ``FieldCipher``: a value sealed to its row and column,
  and keyed lookup hashes.
* :mod:`~mailroom.crypto.rotation` — re-wrapping under a new master key, re-encrypting
  an owner's values under a new data key version.
* :mod:`~mailroom.crypto.shredding` — deleting an owner: key first, then every row.

docs/architecture.md ("Privacy at rest") says what is encrypted and what stays clear.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailroom.crypto.choice import wrapper_from_settings
    from mailroom.crypto.datakeys import DataKey, KeyGone, OwnerKeys
    from mailroom.crypto.fields import FieldCipher, FieldTampered
    from mailroom.crypto.keyfile_wrapper import KeyFileWrapper
    from mailroom.crypto.master_wrapper import MasterKeyWrapper
    from mailroom.crypto.wrapping import KeyWrapper

# Imported on first use: a parse worker imports ``crypto.blind_tokens`` (hashlib only) without
# the cryptography package and the database layer these pull in.
_HOMES = {
    "wrapper_from_settings": "choice",
    "DataKey": "datakeys",
    "KeyGone": "datakeys",
    "OwnerKeys": "datakeys",
    "FieldCipher": "fields",
    "FieldTampered": "fields",
    "KeyFileWrapper": "keyfile_wrapper",
    "MasterKeyWrapper": "master_wrapper",
    "KeyWrapper": "wrapping",
}

__all__ = [
    "DataKey",
    "FieldCipher",
    "FieldTampered",
    "KeyFileWrapper",
    "KeyGone",
    "KeyWrapper",
    "MasterKeyWrapper",
    "OwnerKeys",
    "wrapper_from_settings",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mailroom.crypto' has no attribute {name!r}")
    return getattr(import_module(f"mailroom.crypto.{home}"), name)
