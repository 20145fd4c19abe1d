"""mailroom: a self-hosted mail engine.

Every message from a person's mail accounts lands in one database mailroom
owns; it is threaded, sorted into inbox tabs and served over JMAP and a small
web page. The public API is small on purpose: open a store, import mail,
read it back.
"""

from mailroom.config import Settings, load_settings
from mailroom.errors import MailroomError
from mailroom.store.engine import Store, open_store

__all__ = ["MailroomError", "Settings", "Store", "load_settings", "open_store", "__version__"]

__version__ = "0.1.0"
