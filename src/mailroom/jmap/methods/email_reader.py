"""``Email/get``, ``/changes``, ``/query``, ``/queryChanges`` and ``/set`` (RFC 8621 §4).

``Email/set`` changes only ``keywords`` and ``mailboxIds`` and does it
through the operations service (``labels.operations``): the database, the
change log and the pending changes move in one transaction per call.
``$seen`` is read state, ``$flagged`` the Starred label (also visible as
the mailbox with role ``flagged``); a mailbox change goes to
``Operations.set_labels`` with the old and new mailboxes, which names the
action (trash, spam, restore, archive, ...) that providers carry out.
``destroy`` is delete forever. ``create`` is refused (``forbidden``) until
drafts and imports exist.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Iterable, Iterator
from contextlib import closing
from email.utils import parsedate_to_datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import changes as jchanges
from mailroom.jmap import ids
from mailroom.jmap.bodies import (
    BODY_PROPERTIES,
    DEFAULT_BODY_PROPERTIES,
    HEAVY_MESSAGE_BYTES,
    Structure,
    body_part,
    body_value,
    heavy_work,
    parse_structure,
)
from mailroom.jmap.changes import current_states, parse_state
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.emailquery import EmailFilter, EmailSearch, sort_direction
from mailroom.jmap.errors import MethodError, invalid_arguments, set_error
from mailroom.jmap.mapping import JMAP_ROLE, SETTABLE_KEYWORDS, role_labels
from mailroom.jmap.methods.common import (
    TABS,
    boolean,
    changes_response,
    get_response,
    integer,
    is_int,
    max_changes,
    requested_ids,
    requested_properties,
    unsigned,
    utc_date,
)
from mailroom.jmap.scope import owned_by
from mailroom.labels.operations import Operations
from mailroom.mime.addresses import parse_address_list
from mailroom.mime.msgids import parse_id_list
from mailroom.store.headers import stored_headers
from mailroom.store.models import Blob, Label, Message, MessageLabel

DEFAULT_PROPERTIES = (
    "id",
    "blobId",
    "threadId",
    "mailboxIds",
    "keywords",
    "size",
    "receivedAt",
    "messageId",
    "inReplyTo",
    "references",
    "sender",
    "from",
    "to",
    "cc",
    "bcc",
    "replyTo",
    "subject",
    "sentAt",
    "hasAttachment",
    "preview",
    "bodyValues",
    "textBody",
    "htmlBody",
    "attachments",
)
PROPERTIES = frozenset({*DEFAULT_PROPERTIES, "headers", "bodyStructure"})
TAB_PROPERTIES = frozenset({"category"})
_HEADER_PROPERTIES = frozenset({"inReplyTo", "references", "sender", "headers"})
# Small raw messages are read together up to this many bytes per query.
_RAW_BATCH_BYTES = 4_000_000
_BODY_PROPERTIES = frozenset({"bodyStructure", "bodyValues", "textBody", "htmlBody", "attachments"})
_HEADER_FORMS = frozenset({"asRaw", "asText", "asAddresses", "asMessageIds", "asDate", "asURLs"})


def _addresses(pairs: Iterable[Any]) -> list[dict[str, Any]] | None:
    out = [
        {"name": pair[0] or None, "email": pair[1]}
        for pair in pairs
        if isinstance(pair, list | tuple) and len(pair) == 2 and pair[1]
    ]
    return out or None


def _header_property(name: str) -> tuple[str, str, bool]:
    """Split ``header:Name[:form][:all]``; invalidArguments for a form not offered."""
    parts = name.split(":")
    if len(parts) < 2 or not parts[1]:
        raise invalid_arguments(f"Bad header property {name!r}.")
    field, rest = parts[1], parts[2:]
    every = bool(rest) and rest[-1] == "all"
    if every:
        rest = rest[:-1]
    form = rest[0] if rest else "asRaw"
    if len(rest) > 1 or form not in _HEADER_FORMS:
        raise invalid_arguments(f"The header form of {name!r} is not supported.")
    return field.lower(), form, every


def _header_value(value: str, form: str) -> Any:
    if form in ("asRaw", "asText"):
        return value.strip() if form == "asText" else value
    if form == "asAddresses":
        return [{"name": a.name or None, "email": a.email} for a in parse_address_list(value)]
    if form == "asMessageIds":
        return parse_id_list(value) or None
    if form == "asDate":
        try:
            return utc_date(parsedate_to_datetime(value.strip()))
        except (TypeError, ValueError, IndexError):
            return None
    urls = [part.strip()[1:-1] for part in value.split(",") if part.strip().startswith("<")]
    return urls or None


class EmailReader:
    """Builds Email objects of one user, loading only what the properties need."""

    def __init__(self, session: Session, user_id: int, *, tabs: bool = False) -> None:
        self.session = session
        self.user_id = user_id
        self.tabs = tabs
        self.roles = role_labels(session, user_id)

    def labels(self, message_ids: list[int]) -> dict[int, set[int]]:
        """The label ids of each message."""
        labels: dict[int, set[int]] = defaultdict(set)
        if message_ids:
            for mid, lid in self.session.execute(
                select(MessageLabel.message_id, MessageLabel.label_id).where(
                    MessageLabel.message_id.in_(message_ids)
                )
            ):
                labels[mid].add(lid)
        return labels

    def keywords(self, seen: bool, labels: set[int]) -> dict[str, bool]:
        """The keywords a message shows."""
        keywords: dict[str, bool] = {}
        if seen:
            keywords["$seen"] = True
        if self.roles.get("starred") in labels:
            keywords["$flagged"] = True
        if self.roles.get("drafts") in labels:
            keywords["$draft"] = True
        return keywords

    def read(
        self,
        message_ids: list[int],
        properties: list[str],
        *,
        body_properties: tuple[str, ...] | list[str] = DEFAULT_BODY_PROPERTIES,
        fetch_text: bool = False,
        fetch_html: bool = False,
        fetch_all: bool = False,
        max_bytes: int = 0,
    ) -> dict[int, dict[str, Any]]:
        """Email objects by message id (messages of other users are simply absent)."""
        if not message_ids:
            return {}
        wanted = set(properties)
        columns: list[Any] = [
            Message.id,
            Message.thread_id,
            Message.seen_at,
            Message.size,
            Message.received_at,
            Message.sent_at,
            Message.message_id_header,
            Message.from_name,
            Message.from_email,
            Message.subject,
            Message.has_attachment,
            Message.preview,
            Message.category,
        ]
        if wanted & {"to", "cc", "bcc", "replyTo"}:
            columns.append(Message.recipients)
        messages = {
            row.id: row
            for row in self.session.execute(
                select(*columns).where(
                    Message.id.in_(message_ids), owned_by(Message.user_id, self.user_id)
                )
            )
        }
        found = list(messages)
        labels = self.labels(found) if wanted & {"mailboxIds", "keywords"} else {}
        headers: dict[int, list[list[str]]] = {}
        if wanted & _HEADER_PROPERTIES or any(p.startswith("header:") for p in wanted):
            headers = stored_headers(self.session, found)
        categories: dict[int, str | None] = {}
        if self.tabs and "category" in wanted:
            from mailroom.store.models import Thread

            thread_ids = [m.thread_id for m in messages.values() if m.thread_id is not None]
            by_thread = {
                tid: category
                for tid, category in self.session.execute(
                    select(Thread.id, Thread.category).where(Thread.id.in_(thread_ids))
                )
            }
            categories = {
                m.id: by_thread.get(m.thread_id) if m.thread_id else m.category
                for m in messages.values()
            }
        out: dict[int, dict[str, Any]] = {}
        for mid, message in messages.items():
            fields = headers.get(mid, [])
            obj: dict[str, Any] = {}
            for name in properties:
                if name == "id":
                    obj[name] = ids.email_id(mid)
                elif name == "blobId":
                    obj[name] = ids.raw_blob_id(mid)
                elif name == "threadId":
                    obj[name] = ids.thread_id(message.thread_id, mid)
                elif name == "mailboxIds":
                    obj[name] = {ids.mailbox_id(lid): True for lid in sorted(labels.get(mid, ()))}
                elif name == "keywords":
                    obj[name] = self.keywords(message.seen_at is not None, labels.get(mid, set()))
                elif name == "size":
                    obj[name] = message.size
                elif name == "receivedAt":
                    obj[name] = utc_date(message.received_at)
                elif name == "sentAt":
                    obj[name] = utc_date(message.sent_at)
                elif name == "messageId":
                    obj[name] = [message.message_id_header] if message.message_id_header else None
                elif name in ("inReplyTo", "references"):
                    header = "in-reply-to" if name == "inReplyTo" else "references"
                    values = [v for k, v in fields if k.lower() == header]
                    obj[name] = parse_id_list(values[-1]) or None if values else None
                elif name == "sender":
                    values = [v for k, v in fields if k.lower() == "sender"]
                    obj[name] = (
                        _addresses([[a.name, a.email] for a in parse_address_list(values[-1])])
                        if values
                        else None
                    )
                elif name == "from":
                    obj[name] = _addresses([[message.from_name, message.from_email]])
                elif name in ("to", "cc", "bcc", "replyTo"):
                    key = "reply_to" if name == "replyTo" else name
                    obj[name] = _addresses(message.recipients.get(key, []))
                elif name == "subject":
                    obj[name] = message.subject
                elif name == "hasAttachment":
                    obj[name] = message.has_attachment
                elif name == "preview":
                    obj[name] = message.preview
                elif name == "headers":
                    obj[name] = [{"name": k, "value": v} for k, v in fields]
                elif name.startswith("header:"):
                    field, form, every = _header_property(name)
                    values = [v for k, v in fields if k.lower() == field]
                    if every:
                        obj[name] = [_header_value(v, form) for v in values]
                    else:
                        obj[name] = _header_value(values[-1], form) if values else None
                elif name == "category":
                    obj[name] = categories.get(mid)
                elif name in _BODY_PROPERTIES:
                    obj[name] = None  # filled below, one message at a time
            out[mid] = obj
        body_names = [name for name in properties if name in _BODY_PROPERTIES]
        if body_names:
            seen: set[int] = set()
            # closing(): a large message's heavy-work slot is held across the
            # yield and must be released even if building its parts fails.
            with closing(self._raw_messages(found)) as raws:
                for mid, data in raws:
                    seen.add(mid)
                    structure = parse_structure(mid, data)
                    for name in body_names:
                        out[mid][name] = self._body(
                            structure,
                            name,
                            tuple(body_properties),
                            fetch_text,
                            fetch_html,
                            fetch_all,
                            max_bytes,
                        )
                    del structure, data
            for mid in set(found) - seen:  # no raw bytes kept
                for name in body_names:
                    out[mid][name] = self._body(
                        None, name, (), fetch_text, fetch_html, fetch_all, max_bytes
                    )
        return out

    def _raw_messages(self, message_ids: list[int]) -> Generator[tuple[int, bytes], None, None]:
        """The raw bytes of messages, read a few megabytes at a time.

        A large message is read alone while holding a heavy-work slot, so
        several requests for it never hold more than a few copies at once.
        """
        sizes = self.session.execute(
            select(Message.id, Blob.size)
            .join(Blob, Blob.sha256 == Message.raw_sha256)
            .where(Message.id.in_(message_ids))
        ).all()
        batch: list[int] = []
        total = 0
        for mid, size in sizes:
            if size > HEAVY_MESSAGE_BYTES:
                with heavy_work(size):
                    yield from self._read_raw([mid])
                continue
            if batch and total + size > _RAW_BATCH_BYTES:
                yield from self._read_raw(batch)
                batch, total = [], 0
            batch.append(mid)
            total += size
        if batch:
            yield from self._read_raw(batch)

    def _read_raw(self, message_ids: list[int]) -> Iterator[tuple[int, bytes]]:
        rows = list(
            self.session.execute(
                select(Message.id, Blob.data)
                .join(Blob, Blob.sha256 == Message.raw_sha256)
                .where(Message.id.in_(message_ids))
            ).all()
        )
        while rows:  # pop: each message's bytes are freed once it is done
            mid, data = rows.pop()
            yield mid, data

    @staticmethod
    def _body(
        structure: Structure | None,
        name: str,
        properties: tuple[str, ...],
        fetch_text: bool,
        fetch_html: bool,
        fetch_all: bool,
        max_bytes: int,
    ) -> Any:
        if structure is None:
            return {} if name == "bodyValues" else ([] if name != "bodyStructure" else None)
        if name == "bodyStructure":
            return body_part(structure, structure.root, properties)
        if name == "textBody":
            return [body_part(structure, p, properties) for p in structure.text_parts]
        if name == "htmlBody":
            return [body_part(structure, p, properties) for p in structure.html_parts]
        if name == "attachments":
            return [body_part(structure, p, properties) for p in structure.attachments]
        chosen = []
        if fetch_text or fetch_all:
            chosen += structure.text_parts
        if fetch_html or fetch_all:
            chosen += structure.html_parts
        values: dict[str, Any] = {}
        for part in chosen:
            if part.path not in values and part.ctype.startswith("text/"):
                values[part.path] = body_value(part, max_bytes)
        return values


def email_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/get."""
    user_id = context.check_account(args)
    tabs = TABS in context.using
    known = PROPERTIES | (TAB_PROPERTIES if tabs else frozenset())
    properties = requested_properties(args, known, DEFAULT_PROPERTIES)
    for name in properties:
        if name.startswith("header:"):
            _header_property(name)
    body_properties = requested_properties(
        args, BODY_PROPERTIES, DEFAULT_BODY_PROPERTIES, key="bodyProperties"
    )
    state = current_states(session, user_id).email
    wanted = requested_ids(context, args)
    if wanted is None:
        newest = session.scalars(
            select(Message.id)
            .where(Message.user_id == user_id)
            .order_by(Message.id)
            .limit(context.limits.max_objects_in_get + 1)
        ).all()
        if len(newest) > context.limits.max_objects_in_get:
            raise MethodError("requestTooLarge", "Too many emails to get them all; give ids.")
        wanted = [ids.email_id(mid) for mid in newest]
    parsed = {value: ids.parse_email(value) for value in wanted}
    reader = EmailReader(session, user_id, tabs=tabs)
    objects = reader.read(
        [mid for mid in parsed.values() if mid is not None],
        properties,
        body_properties=body_properties,
        fetch_text=boolean(args, "fetchTextBodyValues"),
        fetch_html=boolean(args, "fetchHTMLBodyValues"),
        fetch_all=boolean(args, "fetchAllBodyValues"),
        max_bytes=unsigned(args, "maxBodyValueBytes", 0),
    )
    found, missing = [], []
    for value, mid in parsed.items():
        if mid is not None and mid in objects:
            found.append(objects[mid])
        else:
            missing.append(value)
    return get_response(context, state, found, missing)


def email_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/changes."""
    user_id = context.check_account(args)
    limit = max_changes(args)
    states = current_states(session, user_id)
    since = parse_state(args.get("sinceState"), states.floor("Email"), states.email)
    changes = jchanges.email_changes(session, user_id, since, limit)
    return changes_response(context, since, changes, ids.email_id)


def _search(context: Context, session: Session, user_id: int, args: dict[str, Any]) -> EmailSearch:
    compiler = EmailFilter(
        session, user_id, role_labels(session, user_id), tabs=TABS in context.using
    )
    condition = compiler.compile(args.get("filter"))
    return EmailSearch(
        session,
        condition,
        ascending=sort_direction(args.get("sort")),
        collapse=boolean(args, "collapseThreads"),
        user_id=user_id,
        simple_mailbox=compiler.simple_mailbox,
    )


def email_query(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/query."""
    user_id = context.check_account(args)
    state = current_states(session, user_id).query
    search = _search(context, session, user_id, args)
    position = integer(args, "position", 0)
    anchor_value = args.get("anchor")
    anchor: int | None = None
    if anchor_value is not None:  # RFC 8620 §5.5: with an anchor, position is ignored
        anchor = ids.parse_email(anchor_value)
        if anchor is None:
            raise MethodError("anchorNotFound", "The anchor is not in the results.")
    cap = context.limits.max_query_limit
    asked = args.get("limit")
    if asked is not None and not is_int(asked, minimum=0):
        raise invalid_arguments("limit must be an unsigned integer (at most 2^53-1).")
    limit = cap if asked is None else min(asked, cap)
    want_total = boolean(args, "calculateTotal")
    result = search.page(
        position=position,
        anchor=anchor,
        anchor_offset=integer(args, "anchorOffset", 0),
        limit=limit,
        want_total=want_total,
    )
    response: dict[str, Any] = {
        "accountId": context.account_id,
        "queryState": str(state),
        "canCalculateChanges": True,
        "position": result.position,
        "ids": [ids.email_id(i) for i in result.ids],
    }
    if want_total:
        response["total"] = result.total
    if asked is None or asked > cap:
        response["limit"] = limit
    return response


def email_query_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/queryChanges: every changed email is removed, and re-added where it now is."""
    user_id = context.check_account(args)
    limit = max_changes(args)
    states = current_states(session, user_id)
    since = parse_state(args.get("sinceQueryState"), states.floor("Email", "Thread"), states.query)
    search = _search(context, session, user_id, args)
    emails, threads = jchanges.query_changes(session, user_id, since)
    if emails:
        threads |= {
            t
            for t in session.scalars(
                select(Message.thread_id).where(
                    Message.id.in_(emails), owned_by(Message.user_id, user_id)
                )
            )
            if t is not None
        }
    affected = set(emails)
    if threads:
        affected |= set(
            session.scalars(
                select(Message.id).where(
                    Message.thread_id.in_(threads), owned_by(Message.user_id, user_id)
                )
            )
        )
    current = search.all_ids()
    added = [
        {"id": ids.email_id(mid), "index": index}
        for index, mid in enumerate(current)
        if mid in affected
    ]
    removed = [ids.email_id(mid) for mid in sorted(affected)]
    if limit is not None and len(removed) + len(added) > limit:
        raise MethodError("tooManyChanges", "More changes than maxChanges; query again.")
    response: dict[str, Any] = {
        "accountId": context.account_id,
        "oldQueryState": str(since),
        "newQueryState": str(states.query),
        "removed": removed,
        "added": added,
    }
    if boolean(args, "calculateTotal"):
        response["total"] = len(current)
    return response


class _PatchError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("description", ""))
        self.error = error


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _true_map(value: object, name: str) -> set[str]:
    if not isinstance(value, dict) or not all(v is True for v in value.values()):
        raise _PatchError(set_error("invalidProperties", f"{name} must map ids to true.", [name]))
    return {str(k) for k in value}


def _apply_patch(
    patch: object, keywords: set[str], mailboxes: set[str]
) -> tuple[set[str], set[str]]:
    """The keywords and mailbox ids an Email has after a PatchObject."""
    if not isinstance(patch, dict):
        raise _PatchError(set_error("invalidPatch", "An update must be a PatchObject."))
    new_keywords, new_mailboxes = set(keywords), set(mailboxes)
    whole = {key for key in patch if key in ("keywords", "mailboxIds")}
    for path, value in patch.items():
        head, _, rest = path.partition("/")
        if head not in ("keywords", "mailboxIds"):
            raise _PatchError(
                set_error(
                    "invalidProperties",
                    f"{head} cannot be changed; only keywords and mailboxIds can.",
                    [head],
                )
            )
        if not rest:
            if head == "keywords":
                new_keywords = {k.lower() for k in _true_map(value, head)}
            else:
                new_mailboxes = _true_map(value, head)
            continue
        if head in whole:
            raise _PatchError(
                set_error("invalidPatch", f"{path} patches {head}, which is also replaced.")
            )
        if "/" in rest or value not in (True, None):
            raise _PatchError(set_error("invalidPatch", f"{path} must be set to true or null."))
        item = _unescape(rest)
        target = new_keywords if head == "keywords" else new_mailboxes
        item = item.lower() if head == "keywords" else item
        if value is True:
            target.add(item)
        else:
            target.discard(item)
    return new_keywords, new_mailboxes


class EmailUpdater:
    """Applies Email/set updates and destroys through the operations service."""

    def __init__(self, session: Session, user_id: int) -> None:
        self.session = session
        self.user_id = user_id
        self.ops = Operations(session, user_id)
        # Create missing system labels now, outside the per-email savepoints.
        self.roles = {role: self.ops.role(role) for role in JMAP_ROLE}
        self.own_labels = set(session.scalars(select(Label.id).where(Label.user_id == user_id)))
        self.reader = EmailReader(session, user_id)

    def current(self, message_ids: list[int]) -> dict[int, tuple[set[str], set[str]]]:
        """(keywords, mailbox ids) of the user's messages among these."""
        rows = self.session.execute(
            select(Message.id, Message.seen_at).where(
                Message.id.in_(message_ids), owned_by(Message.user_id, self.user_id)
            )
        ).all()
        labels = self.reader.labels([row.id for row in rows])
        return {
            row.id: (
                set(self.reader.keywords(row.seen_at is not None, labels.get(row.id, set()))),
                {ids.mailbox_id(lid) for lid in labels.get(row.id, set())},
            )
            for row in rows
        }

    def update(
        self, message_id: int, before: tuple[set[str], set[str]], patch: object
    ) -> dict[str, Any] | None:
        """Apply one patch; the properties that ended other than asked, or None."""
        keywords, mailboxes = _apply_patch(patch, before[0], before[1])
        starred = ids.mailbox_id(self.roles["starred"])
        if ("$flagged" in keywords) != ("$flagged" in before[0]):
            # the keyword wins over the Starred mailbox when a patch names both
            (mailboxes.add if "$flagged" in keywords else mailboxes.discard)(starred)
        elif (starred in mailboxes) != (starred in before[1]):
            (keywords.add if starred in mailboxes else keywords.discard)("$flagged")
        changed_keywords = keywords ^ before[0]
        refused = sorted(changed_keywords - SETTABLE_KEYWORDS)
        if refused:
            raise _PatchError(
                set_error(
                    "invalidProperties",
                    f"The keyword {refused[0]} cannot be set; mailroom keeps only "
                    "$seen and $flagged.",
                    ["keywords"],
                )
            )
        label_ids = {ids.parse_mailbox(m) for m in mailboxes}
        if not mailboxes or None in label_ids or not label_ids <= self.own_labels:
            raise _PatchError(
                set_error(
                    "invalidProperties",
                    "mailboxIds must name at least one existing mailbox of this account.",
                    ["mailboxIds"],
                )
            )
        now = {lid for lid in label_ids if lid is not None}
        was = {lid for lid in (ids.parse_mailbox(m) for m in before[1]) if lid is not None}
        if self.roles["snoozed"] in now - was:
            raise _PatchError(
                set_error(
                    "invalidProperties",
                    "Snoozing needs a wake time, which JMAP cannot give; snooze from mailroom.",
                    ["mailboxIds"],
                )
            )
        if "$seen" in changed_keywords:
            self.ops.mark_read([message_id], "$seen" in keywords)
        # Which action the new mailboxes mean (trash, archive, restore...) is the service's call.
        self.ops.set_labels([message_id], was, now)
        after = self.current([message_id])[message_id]
        differs: dict[str, Any] = {}
        if after[0] != keywords:
            differs["keywords"] = {k: True for k in sorted(after[0])}
        if after[1] != mailboxes:
            differs["mailboxIds"] = {m: True for m in sorted(after[1])}
        return differs or None


def email_set(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/set: keywords and mailboxIds updates, destroy = delete forever."""
    user_id = context.check_account(args)
    old_state = current_states(session, user_id).email
    if_in_state = args.get("ifInState")
    if if_in_state is not None and if_in_state != str(old_state):
        raise MethodError("stateMismatch", "The Email state is not ifInState.")
    create = args.get("create") or {}
    update = args.get("update") or {}
    destroy = args.get("destroy") or []
    if not isinstance(create, dict) or not isinstance(update, dict):
        raise invalid_arguments("create and update must be objects.")
    if not isinstance(destroy, list) or not all(isinstance(v, str) for v in destroy):
        raise invalid_arguments("destroy must be a list of ids.")
    if len(create) + len(update) + len(destroy) > context.limits.max_objects_in_set:
        raise MethodError(
            "requestTooLarge",
            f"At most maxObjectsInSet ({context.limits.max_objects_in_set}) objects per call.",
        )
    not_created = {
        key: set_error(
            "forbidden",
            "mailroom cannot create emails yet (drafts and imports come with sending).",
        )
        for key in create
    }
    updater = EmailUpdater(session, user_id)
    updated: dict[str, Any] = {}
    not_updated: dict[str, Any] = {}
    parsed = {value: ids.parse_email(value) for value in update}
    known = updater.current([m for m in parsed.values() if m is not None])
    for value, patch in update.items():
        message_id = parsed[value]
        if message_id is None or message_id not in known:
            not_updated[value] = set_error("notFound", f"There is no email {value}.")
            continue
        try:
            with session.begin_nested():
                updated[value] = updater.update(message_id, known[message_id], patch)
        except _PatchError as exc:
            not_updated[value] = exc.error
    destroyed: list[str] = []
    not_destroyed: dict[str, Any] = {}
    doomed = {value: ids.parse_email(value) for value in dict.fromkeys(destroy)}
    owned = set(
        session.scalars(
            select(Message.id).where(
                Message.id.in_([m for m in doomed.values() if m is not None]),
                owned_by(Message.user_id, user_id),
            )
        )
    )
    for value, message_id in doomed.items():
        if message_id in owned:
            destroyed.append(value)
        else:
            not_destroyed[value] = set_error("notFound", f"There is no email {value}.")
    if owned:
        updater.ops.delete_forever(sorted(owned))
    session.flush()
    new_state = current_states(session, user_id).email
    return {
        "accountId": context.account_id,
        "oldState": str(old_state),
        "newState": str(new_state),
        "created": None,
        "updated": updated or None,
        "destroyed": destroyed or None,
        "notCreated": not_created or None,
        "notUpdated": not_updated or None,
        "notDestroyed": not_destroyed or None,
    }
