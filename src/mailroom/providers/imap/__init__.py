"""IMAP accounts, synced against any IMAP4rev1 server (CONDSTORE/QRESYNC/MOVE/IDLE when offered).

One concept per module:

``account``     adding an account (offline), its settings and sealed password
``cli``         ``mailroom account add imap`` (registered as the entry's add command)
``connection``  connect/TLS/login with clear errors; the commands sync needs
``login``       opening a stored account's connection, recording ``auth_error``
``identity``    the provider id of an IMAP message (Message-ID + size, or a hash)
``state``       the per-folder sync/import marks and the import state query
``discovery``   folders → labels (special-use, renames, deletes)
``mirror``      writing the server's view (locations, folder labels, flags)
``fetcher``     fetching and storing one page of UIDs (shared by sync and import)
``prefetch``    the importer's look-ahead: next page fetched and parsed meanwhile
``changes``     flags and expunges (CONDSTORE/QRESYNC/UID diff), UIDVALIDITY re-map
``syncer``      new mail and changes: ``sync_account``
``importer``    history, one page per call: ``import_page``
``propagator``  pending changes → the server: ``ImapPropagator`` (``propagate_pending``)
``watcher``     IDLE on the inbox: ``ImapWatcher`` (blocks a thread)
``idle_mux``    many IDLE watches on one selector thread: ``MuxWatcher`` (the supervisor's)

Gmail over IMAP (servers offering ``X-GM-EXT-1``; every other server is untouched):

``gmail_ext``        detection, Gmail's ids (X-GM-MSGID, X-GM-THRID), which folders sync
``gmail_labels``     X-GM-LABELS as mailroom labels, and mirroring them
``gmail_folders``    label folders coming and going (discovery's part)
``gmail_propagate``  labels back as STORE ±X-GM-LABELS, places as moves, delete forever
``gmail_append``     a draft made in mailroom appended once, with Gmail's id
"""

import click

from mailroom.providers import registry
from mailroom.providers.imap.account import PROVIDER, ImapConfig, add_imap_account
from mailroom.providers.imap.idle_mux import MuxWatcher, shared_mux
from mailroom.providers.imap.importer import ImapImporter, import_page, import_stalled
from mailroom.providers.imap.propagator import ImapPropagator, propagate_pending
from mailroom.providers.imap.state import import_state
from mailroom.providers.imap.syncer import ImapSyncer, sync_account
from mailroom.providers.imap.watcher import ImapWatcher

__all__ = [
    "ImapConfig",
    "ImapImporter",
    "ImapPropagator",
    "ImapSyncer",
    "ImapWatcher",
    "MuxWatcher",
    "add_imap_account",
    "import_page",
    "import_stalled",
    "import_state",
    "propagate_pending",
    "sync_account",
]


def _add_command() -> click.Command:
    from mailroom.providers.imap.cli import add_imap_command  # the CLI only, when asked

    return add_imap_command


registry.register(
    registry.ProviderEntry(
        name=PROVIDER,
        syncer=ImapSyncer,
        importer=ImapImporter,
        propagator=ImapPropagator,
        watcher=lambda store, account_id, settings: MuxWatcher(
            store, account_id, settings=settings, mux=shared_mux()
        ),
        add_command=_add_command,
    )
)
