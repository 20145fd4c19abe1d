"""mailroom: a self-hosted mail engine.

Every message from a person's mail accounts lands in one database mailroom
owns; it is threaded, sorted into inbox tabs and served over JMAP and a small
web page. The public API is small on purpose: open a store, import mail,
read it back.

The names below are imported on first use, so that ``import mailroom.mime``
(what the parse worker processes load) does not pull in the database layer.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailroom.config import Settings, load_settings
    from mailroom.errors import MailroomError
    from mailroom.store.engine import Store, open_store

__all__ = ["MailroomError", "Settings", "Store", "load_settings", "open_store", "__version__"]

__version__ = "0.1.0"

_LAZY = {
    "MailroomError": "mailroom.errors",
    "Settings": "mailroom.config",
    "load_settings": "mailroom.config",
    "Store": "mailroom.store.engine",
    "open_store": "mailroom.store.engine",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mailroom' has no attribute {name!r}")
    return getattr(import_module(module), name)
