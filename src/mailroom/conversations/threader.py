"""The threading cascade: which conversation a new message joins.

Stages, each because the one below is not good enough:

1. ``provider`` — the provider's conversation id (Gmail threadId, Graph
   conversationId) within the same account. Messages of the batch being
   threaded are found through ``ProviderThreadMap``, an in-memory map
   (account, provider id) → thread, bounded at ``PROVIDER_MAP_LIMIT``
   entries, whose every hit is checked against the live session (a thread
   merged away or rolled back is never returned); a miss falls back to SQL.
2. ``references`` — RFC 5322 In-Reply-To / References (as filtered and
   capped by ``conversations.references``): join the thread of any stored
   message this one names, or that names the same ancestors (a parent that
   never arrived still ties its replies together). With nothing stored yet
   the message still starts a thread marked ``references``.
3. ``subject`` — the rescue for replies that name no parent at all
   (``conversations.rescue``, run once per batch after the other stages).
4. adoption — stored messages whose In-Reply-To / References name *this*
   message are pulled in, merging their threads into one.

Stages 1, 2 and 4 merge every candidate they find (the oldest thread
survives), so without stage 3 the partition is the connected components of
the reference graph, independent of arrival order and batch boundaries.
Stage 3 recomputes the part of the partition it can affect from stored data
(see ``conversations.rescue``), so the whole cascade keeps that property.
Assignments are written with SQL at once, so later messages of the same
batch see earlier ones.

``assign`` must be idempotent per message: threading a message twice leaves
it where it is.

Sealed mail (``crypto.message_fields``): Message-IDs and references are
stored as the owner's keyed hashes under the newest key version, while older
rows may hold the clear id (stored before sealing was switched on) or a hash
under an older version (an owner key rotation under way). The caller hands
the threader ``forms``: every stored form of the batch's ids → the clear id
(``LookupKeys.id_forms``). Names are then compared by their clear id,
looked up under every form, and what is found is mapped back. Without
``forms`` (no keys: every form is the id itself) nothing of this runs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import TextClause, bindparam, insert, select, text, update
from sqlalchemy.orm import Session

from mailroom.conversations.merger import ThreadMerger
from mailroom.mime import ParsedMessage
from mailroom.store.chunks import in_chunks
from mailroom.store.keys import id_key
from mailroom.store.models import Message, Thread, utcnow

PROVIDER_MAP_LIMIT = 500

# Plain SQL built once: these run several times per message, and building ORM statements
# each time cost more than running them. ``user_id + 0`` keeps SQLite (which has no
# statistics) from scanning all of the user's messages through the (user_id, received_at)
# index instead of using the selective one.
_MESSAGE = text(
    "SELECT account_id, message_id_header, provider_thread_id, thread_id FROM messages "
    "WHERE id = :id"
)
_REFS = text("SELECT ref FROM message_refs WHERE message_id = :id")
_BY_PROVIDER = text(
    "SELECT DISTINCT thread_id FROM messages WHERE user_id + 0 = :user AND account_id = :account "
    "AND provider_thread_id = :key AND thread_id IS NOT NULL AND id != :exclude"
)
_NAMED = text(
    "SELECT DISTINCT thread_id FROM messages WHERE user_id + 0 = :user "
    "AND message_id_header IN :names AND thread_id IS NOT NULL AND id != :exclude"
).bindparams(bindparam("names", expanding=True))
_NAMING = text(
    "SELECT DISTINCT m.thread_id FROM message_refs r JOIN messages m ON m.id = r.message_id "
    "WHERE r.ref IN :names AND m.user_id + 0 = :user AND m.thread_id IS NOT NULL "
    "AND m.id != :exclude"
).bindparams(bindparam("names", expanding=True))


def id_forms_of(
    session: Session, user_id: int, messages: Iterable[tuple[ParsedMessage, Sequence[str]]]
) -> dict[str, str] | None:
    """Every stored form of these messages' Message-IDs and references → the id (sealed mail).

    ``messages``: each parsed message with its reference chain
    (``conversations.references.reference_chain``), made once by the caller when it
    stored the references. None when the store has no keys or every form is the id
    itself: threading then compares stored values as they are, at no extra cost.
    """
    from mailroom.crypto.message_fields import LookupKeys
    from mailroom.crypto.sealing import mail_cipher

    if mail_cipher(session) is None:
        return None
    ids: set[str] = set()
    for parsed, chain in messages:
        if parsed.message_id:
            ids.add(id_key(parsed.message_id))
        ids.update(chain)
    forms = LookupKeys(session, user_id).id_forms(ids)
    return None if all(form == clear for form, clear in forms.items()) else forms


@dataclass
class ThreadOutcome:
    """Where a message went and which threads were dissolved on the way."""

    thread_id: int
    origin: str
    destroyed: set[int] = field(default_factory=set)


class ProviderThreadMap:
    """(account, provider conversation id) → thread id for the batch being threaded.

    Bounded (least recently used entries go first) and checked on every hit
    against the live session, so a thread that was merged away, deleted or
    rolled back is never handed out.
    """

    def __init__(self, limit: int = PROVIDER_MAP_LIMIT) -> None:
        self.limit = limit
        self._threads: OrderedDict[tuple[int, str], int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._threads)

    def get(self, session: Session, account_id: int, key: str) -> int | None:
        """The thread of this conversation if known and still alive, else None."""
        thread_id = self._threads.get((account_id, key))
        if thread_id is None:
            return None
        alive = session.scalar(select(Thread.id).where(Thread.id == thread_id))
        if alive is None:
            del self._threads[(account_id, key)]
            return None
        self._threads.move_to_end((account_id, key))
        return thread_id

    def put(self, account_id: int, key: str, thread_id: int) -> None:
        """Remember the thread of a conversation, forgetting the oldest entry when full."""
        self._threads[(account_id, key)] = thread_id
        self._threads.move_to_end((account_id, key))
        while len(self._threads) > self.limit:
            self._threads.popitem(last=False)

    def merged(self, survivor: int, dissolved: set[int]) -> None:
        """Point entries of dissolved threads at the survivor."""
        if dissolved:
            for key, thread_id in self._threads.items():
                if thread_id in dissolved:
                    self._threads[key] = survivor


class Threader:
    """Assigns messages of one user to threads (stages 1, 2 and 4); idempotent per message."""

    def __init__(
        self, session: Session, user_id: int, forms: Mapping[str, str] | None = None
    ) -> None:
        self.session = session
        self.user_id = user_id
        self.merger = ThreadMerger(session, user_id)
        self.provider_map = ProviderThreadMap()
        # Every stored form of the batch's ids → the clear id (sealed mail; see module doc).
        self.forms: Mapping[str, str] = forms or {}
        self._by_clear: dict[str, list[str]] = {}
        for form, clear in self.forms.items():
            self._by_clear.setdefault(clear, []).append(form)

    def clear_name(self, stored: str) -> str:
        """The id a stored name stands for (itself when the batch gave no other form of it)."""
        return self.forms.get(stored, stored)

    def all_forms(self, names: Iterable[str]) -> list[str]:
        """Every stored form of these names, to look them up by (sorted, no repeats)."""
        if not self.forms:
            return sorted(set(names))
        found: set[str] = set()
        for name in names:
            clear = self.clear_name(name)
            found.add(name)
            found.add(clear)
            found.update(self._by_clear.get(clear, ()))
        return sorted(found)

    def assign(self, message_id: int) -> ThreadOutcome:
        """Put the message into its conversation, merging conversations it connects."""
        session = self.session
        message = session.execute(_MESSAGE, {"id": message_id}).one()
        refs = list(session.scalars(_REFS, {"id": message_id}))
        candidates: set[int] = set()
        origin = "new"
        if message.provider_thread_id:
            known = self.provider_map.get(session, message.account_id, message.provider_thread_id)
            if known is not None:
                found = {known}
            else:
                found = self._threads(
                    _BY_PROVIDER,
                    account=message.account_id,
                    key=message.provider_thread_id,
                    exclude=message_id,
                )
            if found:
                origin = "provider"
            candidates |= found
        names = [*refs, message.message_id_header] if message.message_id_header else refs
        if names:
            if self.forms:
                names = self.all_forms(names)
            found = self._threads(_NAMED, names=names, exclude=message_id)
            found |= self._threads(_NAMING, names=names, exclude=message_id)
            if found and origin == "new":
                origin = "references"
            candidates |= found
        if message.thread_id is not None:
            candidates.add(message.thread_id)
        if not candidates:
            origin = "references" if refs else "new"
            thread = Thread(user_id=self.user_id, origin=origin)
            session.add(thread)
            session.flush()
            candidates.add(thread.id)
        survivor, destroyed = self.merger.merge(candidates)
        self.provider_map.merged(survivor, destroyed)
        if message.thread_id != survivor:
            session.execute(
                update(Message).where(Message.id == message_id).values(thread_id=survivor)
            )
        if message.provider_thread_id:
            self.provider_map.put(message.account_id, message.provider_thread_id, survivor)
        return ThreadOutcome(survivor, origin, destroyed)

    def _threads(self, statement: TextClause, **params: object) -> set[int]:
        rows = self.session.scalars(statement, {"user": self.user_id, **params})
        return {thread_id for thread_id in rows if thread_id is not None}


_BATCH_MESSAGES = text(
    "SELECT id, account_id, message_id_header, provider_thread_id, thread_id FROM messages "
    "WHERE id IN :ids"
).bindparams(bindparam("ids", expanding=True))
_BATCH_REFS = text("SELECT message_id, ref FROM message_refs WHERE message_id IN :ids").bindparams(
    bindparam("ids", expanding=True)
)
_NAMED_BY = text(
    "SELECT DISTINCT message_id_header, thread_id FROM messages WHERE user_id + 0 = :user "
    "AND message_id_header IN :names AND thread_id IS NOT NULL"
).bindparams(bindparam("names", expanding=True))
_NAMING_BY = text(
    "SELECT DISTINCT r.ref, m.thread_id FROM message_refs r JOIN messages m ON m.id = r.message_id "
    "WHERE r.ref IN :names AND m.user_id + 0 = :user AND m.thread_id IS NOT NULL"
).bindparams(bindparam("names", expanding=True))
_ASSIGN = text("UPDATE messages SET thread_id = :tid WHERE id = :mid")
_PROVIDER_BY = text(
    "SELECT DISTINCT provider_thread_id, thread_id FROM messages WHERE user_id + 0 = :user "
    "AND account_id = :account AND provider_thread_id IN :keys AND thread_id IS NOT NULL"
).bindparams(bindparam("keys", expanding=True))


class BatchThreader(Threader):
    """Stages 1, 2 and 4 for a whole batch at once: a handful of queries, not a few per message.

    The relation is the same as ``assign``'s — a message joins every thread
    holding a message it names, that names what it names, or that shares its
    provider conversation id — solved as connected components over messages,
    names and stored threads (union-find), so the result is the partition
    ``assign`` reaches one message at a time.
    """

    def assign_batch(self, message_ids: list[int]) -> dict[int, ThreadOutcome]:
        """Thread every message of the batch; returns the outcome per message id."""
        session = self.session
        session.flush()  # the lookups run on the Core connection (no ORM result processing)
        connection = session.connection()
        rows = [
            row
            for chunk in in_chunks(sorted(message_ids))
            for row in connection.execute(_BATCH_MESSAGES, {"ids": chunk})
        ]
        refs: dict[int, list[str]] = {}
        for chunk in in_chunks(sorted(message_ids)):
            for mid, ref in connection.execute(_BATCH_REFS, {"ids": chunk}):
                refs.setdefault(mid, []).append(ref)
        parent: dict[tuple[str, object], tuple[str, object]] = {}

        def find(node: tuple[str, object]) -> tuple[str, object]:
            root = parent.setdefault(node, node)
            while root != parent[root]:
                root = parent[root]
            while node != root:
                parent[node], node = root, parent[node]
            return root

        def union(a: tuple[str, object], b: tuple[str, object]) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb, key=repr)] = min(ra, rb, key=repr)

        names: set[str] = set()
        keys: dict[int, set[str]] = {}
        for row in rows:
            node = ("m", row.id)
            find(node)
            own = [*refs.get(row.id, [])]
            if row.message_id_header:
                own.append(row.message_id_header)
            own = [self.clear_name(name) for name in own]
            for name in own:
                union(node, ("n", name))
            names.update(own)
            if row.thread_id is not None:
                union(node, ("t", row.thread_id))
            if row.provider_thread_id:
                union(node, ("p", (row.account_id, row.provider_thread_id)))
                keys.setdefault(row.account_id, set()).add(row.provider_thread_id)
        name_list = self.all_forms(names)
        for name_chunk in in_chunks(name_list):
            for statement in (_NAMED_BY, _NAMING_BY):
                for name, thread_id in connection.execute(
                    statement, {"user": self.user_id, "names": name_chunk}
                ):
                    union(("n", self.clear_name(name)), ("t", thread_id))
        for account_id, account_keys in keys.items():
            for key_chunk in in_chunks(sorted(account_keys)):
                for key, thread_id in connection.execute(
                    _PROVIDER_BY, {"user": self.user_id, "account": account_id, "keys": key_chunk}
                ):
                    union(("p", (account_id, key)), ("t", thread_id))
        components: dict[tuple[str, object], tuple[list[int], set[int]]] = {}
        for node in list(parent):
            kind, value = node
            if kind not in ("m", "t"):
                continue
            members, threads = components.setdefault(find(node), ([], set()))
            if kind == "m":
                members.append(int(value))  # type: ignore[call-overload]
            else:
                threads.add(int(value))  # type: ignore[call-overload]
        by_id = {row.id: row for row in rows}
        groups = sorted(
            (sorted(members), threads) for members, threads in components.values() if members
        )
        fresh = [(members, threads) for members, threads in groups if not threads]
        new_ids = self._new_threads(
            ["references" if any(refs.get(m) for m in members) else "new" for members, _ in fresh]
        )
        outcomes: dict[int, ThreadOutcome] = {}
        assignments: list[dict[str, int]] = []
        fresh_threads = iter(new_ids)
        for members, threads in groups:
            has_refs = any(refs.get(mid) for mid in members)
            if threads:
                survivor, destroyed = self.merger.merge(threads)
                origin = "references" if has_refs or len(threads) > 1 else "provider"
            else:
                survivor, destroyed = next(fresh_threads), set()
                origin = "references" if has_refs else "new"
            for index, mid in enumerate(members):
                outcomes[mid] = ThreadOutcome(survivor, origin, destroyed if index == 0 else set())
                if by_id[mid].thread_id != survivor:
                    assignments.append({"mid": mid, "tid": survivor})
        if assignments:
            session.connection().execute(_ASSIGN, assignments)
        return outcomes

    def _new_threads(self, origins: list[str]) -> list[int]:
        """Insert one thread per origin in one statement; ids in the same order.

        The rows differ only in their origin, so any thread of the right origin
        will do for each entry: no need for RETURNING to keep parameter order
        (which SQLite can only give one row per statement).
        """
        if not origins:
            return []
        now = utcnow()
        rows = [{"user_id": self.user_id, "origin": o, "created_at": now} for o in origins]
        statement = insert(Thread).returning(Thread.id, Thread.origin)
        created: dict[str, list[int]] = {}
        for thread_id, origin in self.session.connection().execute(statement, rows):
            created.setdefault(origin, []).append(thread_id)
        for ids in created.values():
            ids.sort(reverse=True)
        return [created[origin].pop() for origin in origins]
