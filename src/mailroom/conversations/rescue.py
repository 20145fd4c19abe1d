"""Stage 3 of threading: the subject rescue, and how it stays independent of arrival order.

The rule (a function of the stored messages, not of their arrival order):

- A message is *eligible* when its subject has a reply prefix
  (``conversations.subject``), it names no parent (no In-Reply-To /
  References survived ``conversations.references``) and it has no provider
  conversation id. A non-reply always starts its own conversation.
- The reference components (what stages 1, 2 and 4 build) are of two kinds.
  A component is *rooted* when it holds an opening message (one that names
  no parent and is not eligible) or a message naming a parent that was
  never stored (the conversation began before our mail). Otherwise it is a
  *reply chain*: everything in it goes back to eligible replies.
- An *anchor* of an eligible message R is any other message A that is not
  eligible itself, has the same normalized subject, was received within
  ``SUBJECT_WINDOW`` (30 days) of R, either side, and shares a participant
  with R (From, To, Cc; the owner's own addresses do not count, or every
  "Re: invoice" spam would qualify).
- Only reply chains move. The *candidates* of a chain are the rooted
  components holding an anchor of one of its eligible replies. The chain
  joins its candidate when there is exactly one; with none, or with two or
  more (the subject cannot say which conversation it answers), it stays
  where references put it. So a rooted conversation never moves, and two of
  them are never joined by subject: the rescue attaches replies to one
  existing conversation.

Keeping it order independent: a later arrival can give a chain its first
candidate (it joins), a second one (it must leave again), merge two
candidates into one (it may now join), or root the chain itself (a message
naming a lost parent answers into it; it must leave). So after stages 1, 2
and 4 have run for a batch, ``SubjectRescue`` finds every eligible message
whose decision the batch may have changed — the batch's own eligible
messages, eligible messages anchored by the batch's messages, and those
anchored by (or inside) threads the batch merged or grew — and recomputes
the partition of the threads holding them from stored data: reference
components by union-find, then the rule above. Threads that only provide
anchors are read-only context: nothing in them can have changed, so they
are joined whole or left alone. ``ThreadMerger.regroup`` then applies the
result — merging, and in the rare cases above splitting a chain back out.

Lookups: anchors, and the eligible messages a batch's messages may anchor, are
found for the whole batch at once by the indexed subject key
(``conversations.subject.key_hash``) within one time span covering the
batch's 30-day windows; the exact rule is then checked in Python.

Sealed mail (``crypto.message_fields``): a sealed row's subject, sender and
recipients are opened after loading (``open_rows``); the reply-like pattern
that narrows the eligible lookups in SQL is only applied to clear rows, sealed
rows pass and are checked in Python (their subjects are split anyway).
Subject keys are looked up under every stored form
(``LookupKeys.subject_forms``), and Message-IDs and references, which may be
stored clear, or hashed under one key version or another, are compared by the
id they stand for: the batch's forms (handed in by the threading stage), the
hashes of every clear id the rescue reads and, while an owner key rotation
runs (hashes of one id under two versions), the ids of the messages' header
lists.
"""

from __future__ import annotations

import logging
from collections import defaultdict, namedtuple
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy import Select, bindparam, exists, not_, or_, select
from sqlalchemy.orm import Session

from mailroom.conversations.merger import ThreadMerger
from mailroom.conversations.references import ids_in_headers
from mailroom.conversations.subject import REPLY_PREFIXES, key_hash, split_subject
from mailroom.crypto.mail_reading import columns_of
from mailroom.crypto.message_fields import LookupKeys, open_rows
from mailroom.crypto.sealing import mail_cipher
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Message, MessageRef

log = logging.getLogger(__name__)

_Query = Select[*tuple[Any, ...]]  # a statement of any columns

SUBJECT_WINDOW = timedelta(days=30)
# Subjects a reply can start with (prefix or list tag) or end with ("(fwd)"); checked exactly later.
_REPLY_LIKE = (
    *sorted({f"{p[:2]}%" for p in REPLY_PREFIXES}),
    "[%",
    "%(fw)",
    "%(fwd)",
)


@dataclass(slots=True)
class Facts:
    """What the rescue needs to know about one stored message."""

    id: int
    thread_id: int
    account_id: int
    message_id_header: str | None
    provider_thread_id: str | None
    received_at: datetime
    participants: frozenset[str]
    has_refs: bool
    reply: bool
    core: str  # normalized subject, original case (for the LIKE lookup)
    key: str  # normalized subject, case-folded (for comparing)

    @property
    def eligible(self) -> bool:
        """A reply naming no parent: the only kind of message threaded by subject."""
        return self.reply and not self.has_refs and not self.provider_thread_id and bool(self.key)

    @property
    def anchor_capable(self) -> bool:
        """May be the message an eligible reply answers."""
        return bool(self.key) and not self.eligible


@dataclass
class RescueOutcome:
    """Threads the rescue changed and threads it dissolved."""

    touched: set[int] = field(default_factory=set)
    destroyed: set[int] = field(default_factory=set)
    seeds: set[int] = field(default_factory=set)


# Sealed rows' subjects are ciphertext: they pass, and Python checks them once opened.
_REPLY_LIKE_CLAUSE = or_(Message.sealed, *(Message.subject.ilike(p) for p in _REPLY_LIKE))
_OPENED = ("subject", "from_email", "recipients")
_NO_REFS = not_(exists().where(MessageRef.message_id == Message.id))

# The statements are built once with bound parameters (lists expand), so SQLAlchemy
# compiles each once and reuses it: building them anew cost more than running them.
# ``user_id + 0`` keeps SQLite from scanning the user's messages through the
# (user_id, received_at) index instead of the selective one (id, thread, subject key).
_FACTS: _Query = select(
    Message.id,
    Message.user_id,
    Message.sealed,
    Message.thread_id,
    Message.account_id,
    Message.message_id_header,
    Message.provider_thread_id,
    Message.received_at,
    Message.subject,
    Message.from_email,
    Message.recipients,
    exists().where(MessageRef.message_id == Message.id).label("has_refs"),
).where(Message.user_id + 0 == bindparam("user"), Message.thread_id.is_not(None))
_FACTS_BY_ID = _FACTS.where(Message.id.in_(bindparam("ids", expanding=True)))
_FACTS_BY_THREAD = _FACTS.where(Message.thread_id.in_(bindparam("ids", expanding=True)))
_FACTS_NEAR = _FACTS.where(
    Message.subject_key.in_(bindparam("keys", expanding=True)),
    Message.received_at >= bindparam("low"),
    Message.received_at <= bindparam("high"),
)
_ELIGIBLE_NEAR = _FACTS_NEAR.where(
    Message.provider_thread_id.is_(None), _NO_REFS, _REPLY_LIKE_CLAUSE
)
_ELIGIBLE_SUBJECTS_OF_THREADS = select(
    Message.thread_id, Message.subject, Message.id, Message.user_id, Message.sealed
).where(
    Message.thread_id.in_(bindparam("ids", expanding=True)),
    Message.provider_thread_id.is_(None),
    _NO_REFS,
    _REPLY_LIKE_CLAUSE,
)
_REFS = select(MessageRef.message_id, MessageRef.ref).where(
    MessageRef.message_id.in_(bindparam("ids", expanding=True))
)


def _opened(
    session: Session, rows: Iterable[Any], known: dict[int, dict[str, Any]] | None = None
) -> list[Any]:
    """The rows, sealed rows' subject, sender and recipients opened (clear rows as they are).

    ``known``: the opened columns by message id, used instead of opening again and
    filled with what is opened here (a batch reads a message in several look-ups).
    """
    found = list(rows)
    if not any(row.sealed for row in found):
        return found
    known = {} if known is None else known
    columns = [column for column in _OPENED if column in found[0]._mapping]
    fresh = [
        row for row in found if row.sealed and not known.get(row.id, {}).keys() >= set(columns)
    ]
    for values in open_rows(session, fresh, columns):
        known.setdefault(int(values["id"]), {}).update({c: values[c] for c in columns})
    fields = tuple(found[0]._fields)
    make = _opened_row(fields)
    places = [(fields.index(column), column) for column in columns]
    opened: list[Any] = []
    for row in found:
        if row.sealed:
            mine = known[row.id]
            copy = list(row)
            for index, column in places:
                copy[index] = mine[column]
            opened.append(make(copy))
        else:
            opened.append(row)
    return opened


@lru_cache(maxsize=32)
def _opened_row(fields: tuple[str, ...]) -> Callable[[Iterable[Any]], Any]:
    """Makes row-like copies (attributes by column name) of rows with ``fields``."""
    shape = namedtuple("OpenedRow", fields)  # type: ignore[misc]
    make: Callable[[Iterable[Any]], Any] = shape._make
    return make


def _eligible_subject(subject: str | None) -> bool:
    reply, core = split_subject(subject or "")
    return reply and bool(core)


def _participants(from_email: str, recipients: Any, owner: Collection[str]) -> frozenset[str]:
    found = {from_email.lower()} if from_email else set()
    if isinstance(recipients, dict):
        for kind in ("to", "cc"):
            for entry in recipients.get(kind) or []:
                if isinstance(entry, list | tuple) and len(entry) == 2 and entry[1]:
                    found.add(str(entry[1]).lower())
    return frozenset(found - set(owner))


def _rooted(
    everything: Sequence[Facts], refs: dict[int, list[str]], component: dict[int, str]
) -> set[str]:
    """Rooted components: holding an opening message or a message naming a lost parent."""
    carried: dict[str, set[str]] = defaultdict(set)
    named: dict[str, set[str]] = defaultdict(set)
    rooted: set[str] = set()
    for facts in everything:
        root = component[facts.id]
        names = refs.get(facts.id, ())
        if not names and not facts.eligible:
            rooted.add(root)
        if facts.message_id_header:
            carried[root].add(facts.message_id_header)
        named[root].update(names)
    return rooted | {root for root, ids in named.items() if ids - carried[root]}


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, node: str) -> str:
        parent = self.parent.setdefault(node, node)
        while parent != node:
            grand = self.parent[parent]
            self.parent[node] = grand
            node, parent = parent, grand
        return node

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


class SubjectRescue:
    """Runs stage 3 for one batch of one user (see the module docstring)."""

    def __init__(
        self,
        session: Session,
        user_id: int,
        owner_addresses: Collection[str],
        forms: Mapping[str, str] | None = None,
        known: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> None:
        self.session = session
        self.user_id = user_id
        self.owner = frozenset(address.lower() for address in owner_addresses)
        self.merger = ThreadMerger(session, user_id)
        self._anchor_cache: dict[int, list[Facts]] = {}
        self._thread_cache: dict[int, list[Facts]] = {}  # read before ``run`` writes anything
        # Sealed mail: the owner's lookup keys (None without keys: stored forms are the
        # values), and stored form of a Message-ID → the id it stands for.
        self.lookups = LookupKeys(session, user_id) if mail_cipher(session) is not None else None
        self.forms: dict[str, str] = dict(forms or {})
        # Sealed rows' subject, sender and recipients by message id: the batch's own from
        # the parsed mail (``known``), others as they are opened, each once per batch.
        self.opened: dict[int, dict[str, Any]] = {k: dict(v) for k, v in (known or {}).items()}

    # -- loading -----------------------------------------------------------

    def _facts(self, statement: _Query, **params: Any) -> list[Facts]:
        found = []
        # On the Core connection: the rows are plain tuples, and the ORM's result
        # processing cost more than the query (``run`` flushes the session first).
        rows = self.session.connection().execute(statement, {"user": self.user_id, **params})
        for row in _opened(self.session, rows, self.opened):
            reply, core = split_subject(row.subject or "")
            found.append(
                Facts(
                    id=row.id,
                    thread_id=row.thread_id,
                    account_id=row.account_id,
                    message_id_header=row.message_id_header,
                    provider_thread_id=row.provider_thread_id,
                    received_at=row.received_at,
                    participants=_participants(row.from_email, row.recipients, self.owner),
                    has_refs=bool(row.has_refs),
                    reply=reply,
                    core=core,
                    key=core.casefold(),
                )
            )
        return found

    def _facts_by(self, statement: _Query, ids: Iterable[int]) -> list[Facts]:
        ordered = sorted(set(ids))
        found: list[Facts] = []
        for chunk in in_chunks(ordered):
            found += self._facts(statement, ids=chunk)
        return found

    def _threads(self, thread_ids: Iterable[int]) -> list[Facts]:
        """The facts of every message of these threads, each thread read once per batch."""
        wanted = set(thread_ids)
        missing = wanted - self._thread_cache.keys()
        for thread_id in missing:
            self._thread_cache[thread_id] = []
        for facts in self._facts_by(_FACTS_BY_THREAD, missing):
            self._thread_cache[facts.thread_id].append(facts)
        return [facts for t in sorted(wanted) for facts in self._thread_cache[t]]

    def _refs(self, message_ids: Sequence[int]) -> dict[int, list[str]]:
        refs: dict[int, list[str]] = defaultdict(list)
        ids = sorted(set(message_ids))
        for chunk in in_chunks(ids):
            for message_id, ref in self.session.connection().execute(_REFS, {"ids": chunk}):
                refs[message_id].append(ref)
        return refs

    def _same_ids(self, everything: list[Facts], refs: dict[int, list[str]]) -> None:
        """Store every Message-ID and reference as the id it stands for (sealed mail).

        Stored forms differ for one id (clear in a row from before sealing, hashed
        under one key version or another): the batch's forms are known, and every
        stored value that may be a clear id is hashed under every version, so a hash
        of it stored elsewhere is recognised.
        """
        assert self.lookups is not None
        stored = {f.message_id_header for f in everything if f.message_id_header}
        stored.update(ref for names in refs.values() for ref in names)
        for value in sorted(stored - self.forms.keys()):  # each may be a clear id
            for form in self.lookups.id_forms([value]):
                if form != value and form in stored:
                    self.forms.setdefault(form, value)
        unknown = stored - self.forms.keys() - set(self.forms.values())
        if unknown and self._rotating():
            # Hashes under an old version and the new one, with no clear form to tie them:
            # the ids come from the messages' header lists (only while a rotation runs).
            named = [
                f.id
                for f in everything
                if f.message_id_header in unknown or not unknown.isdisjoint(refs.get(f.id, ()))
            ]
            headers = columns_of(self.session, named, ["headers"], self.user_id)
            clear: set[str] = set()
            for columns in headers.values():
                clear |= ids_in_headers(columns.get("headers") or [])
            for form, value in self.lookups.id_forms(sorted(clear)).items():
                if form != value and form in unknown:
                    self.forms.setdefault(form, value)
        if not self.forms:
            return
        for facts in everything:
            if facts.message_id_header:
                facts.message_id_header = self.forms.get(
                    facts.message_id_header, facts.message_id_header
                )
        for names in refs.values():
            names[:] = [self.forms.get(name, name) for name in names]

    def _rotating(self) -> bool:
        """Whether the owner holds more than one key version (a key rotation under way)."""
        cipher = mail_cipher(self.session)
        return cipher is not None and len(cipher.keys.versions(self.user_id)) > 1

    # -- the rule ----------------------------------------------------------

    @staticmethod
    def is_anchor(reply: Facts, other: Facts) -> bool:
        """Whether ``other`` is an anchor of the eligible message ``reply``."""
        return (
            other.id != reply.id
            and other.anchor_capable
            and other.key == reply.key
            and abs(other.received_at - reply.received_at) <= SUBJECT_WINDOW
            and bool(reply.participants & other.participants)
        )

    def anchors(self, reply: Facts) -> list[Facts]:
        """The anchors of an eligible message, from stored data."""
        cached = self._anchor_cache.get(reply.id)
        if cached is None:
            self.load_anchors([reply])
            cached = self._anchor_cache[reply.id]
        return cached

    def load_anchors(self, replies: Sequence[Facts]) -> None:
        """Find the anchors of many eligible messages with a few queries (cached per message)."""
        wanted = {r.id: r for r in replies if r.id not in self._anchor_cache}
        if not wanted:
            return
        by_key: dict[str, list[Facts]] = defaultdict(list)
        for reply in wanted.values():
            by_key[reply.key].append(reply)
        for reply_id in wanted:
            self._anchor_cache[reply_id] = []
        for other in self._near(by_key):
            for reply in by_key[other.key]:
                if self.is_anchor(reply, other):
                    self._anchor_cache[reply.id].append(other)

    def _near(self, by_key: dict[str, list[Facts]], statement: _Query = _FACTS_NEAR) -> list[Facts]:
        """Stored messages with one of the subject keys, received in the window of the messages.

        One time span covers every message (the exact window is checked by the caller):
        the statement keeps one shape, so it is compiled once and cached.
        """
        times = [f.received_at for group in by_key.values() for f in group]
        low, high = min(times) - SUBJECT_WINDOW, max(times) + SUBJECT_WINDOW
        if self.lookups is None:
            keys = sorted(key_hash(key) for key in by_key)
        else:  # clear, and hashed under every key version
            keys = sorted(self.lookups.subject_forms(by_key))
        found: list[Facts] = []
        for chunk in in_chunks(keys):
            found += self._facts(statement, keys=chunk, low=low, high=high)
        return [f for f in found if f.key in by_key]

    def replies_anchored_by(self, anchors: Sequence[Facts]) -> list[Facts]:
        """Stored eligible messages that have one of ``anchors`` as an anchor."""
        by_key: dict[str, list[Facts]] = defaultdict(list)
        for anchor in anchors:
            if anchor.anchor_capable:
                by_key[anchor.key].append(anchor)
        if not by_key:
            return []
        found: dict[int, Facts] = {}
        for reply in self._near(by_key, _ELIGIBLE_NEAR):
            if reply.eligible and any(self.is_anchor(reply, a) for a in by_key[reply.key]):
                found[reply.id] = reply
        return list(found.values())

    # -- one batch -----------------------------------------------------------

    def run(self, new_ids: Collection[int], changed_threads: Collection[int]) -> RescueOutcome:
        """Recompute the subject part of the partition the batch may have changed."""
        self.session.flush()  # the lookups below read through the Core connection
        new = self._facts_by(_FACTS_BY_ID, new_ids)
        seeds: dict[int, Facts] = {f.id: f for f in new if f.eligible}
        anchors = [f for f in new if f.anchor_capable]
        # Threads whose reference components may have merged: those the batch merged, and
        # those it grew that hold an eligible message (only subject links make a thread hold
        # more than one component).
        grown = {f.thread_id for f in new} - set(changed_threads)
        scan = set(changed_threads)
        if grown:
            ordered = sorted(grown)
            for chunk in in_chunks(ordered):
                rows = self.session.connection().execute(
                    _ELIGIBLE_SUBJECTS_OF_THREADS, {"ids": chunk}
                )
                scan |= {
                    row.thread_id
                    for row in _opened(self.session, rows, self.opened)
                    if row.thread_id is not None and _eligible_subject(row.subject)
                }
        for facts in self._threads(scan):
            if facts.eligible:
                seeds[facts.id] = facts
            elif facts.anchor_capable:
                anchors.append(facts)
        for reply in self.replies_anchored_by(anchors):
            seeds[reply.id] = reply
        outcome = RescueOutcome(seeds=set(seeds))
        if not seeds:
            return outcome
        region = {f.thread_id for f in seeds.values()}
        region_facts = self._threads(region)
        self.load_anchors([f for f in region_facts if f.eligible])
        context: set[int] = set()
        for facts in region_facts:
            if facts.eligible:
                context |= {a.thread_id for a in self.anchors(facts)} - region
        context_facts = self._threads(context)
        everything = [*region_facts, *context_facts]
        refs = self._refs([f.id for f in everything])
        if self.lookups is not None:
            self._same_ids(everything, refs)

        components = _UnionFind()
        for facts in everything:
            node = f"m{facts.id}"
            components.find(node)
            if facts.message_id_header:
                components.union(node, "i" + facts.message_id_header)
            for ref in refs.get(facts.id, ()):
                components.union(node, "i" + ref)
            if facts.provider_thread_id:
                components.union(node, f"p{facts.account_id}:{facts.provider_thread_id}")
        component = {f.id: components.find(f"m{f.id}") for f in everything}
        rooted = _rooted(everything, refs, component)
        chains: dict[str, list[Facts]] = defaultdict(list)
        for facts in region_facts:
            if facts.eligible and component[facts.id] not in rooted:
                chains[component[facts.id]].append(facts)
        links: list[tuple[int, int]] = []
        for chain, replies in chains.items():
            candidates: dict[str, int] = {}
            for reply in replies:
                for anchor in self.anchors(reply):
                    found = component.get(anchor.id)
                    if found is not None and found != chain and found in rooted:
                        candidates.setdefault(found, anchor.id)
            if len(candidates) == 1:
                links.append((replies[0].id, next(iter(candidates.values()))))
        for a, b in links:
            components.union(f"m{a}", f"m{b}")
        by_thread: dict[int, list[int]] = defaultdict(list)
        for facts in context_facts:
            by_thread[facts.thread_id].append(facts.id)
        for members in by_thread.values():
            for other in members[1:]:
                components.union(f"m{members[0]}", f"m{other}")
        groups: dict[str, list[int]] = defaultdict(list)
        for facts in everything:
            groups[components.find(f"m{facts.id}")].append(facts.id)
        current = {f.id: f.thread_id for f in everything}
        touched, destroyed = self.merger.regroup(groups.values(), current)
        outcome.touched, outcome.destroyed = touched, destroyed
        return outcome
