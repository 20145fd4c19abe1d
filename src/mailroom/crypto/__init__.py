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

from mailroom.crypto.choice import wrapper_from_settings
from mailroom.crypto.datakeys import DataKey, KeyGone, OwnerKeys
from mailroom.crypto.fields import FieldCipher, FieldTampered
from mailroom.crypto.keyfile_wrapper import KeyFileWrapper
from mailroom.crypto.master_wrapper import MasterKeyWrapper
from mailroom.crypto.wrapping import KeyWrapper

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
