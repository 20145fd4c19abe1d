"""A small IMAP4rev1 server over TCP that speaks Gmail's extensions (``X-GM-EXT-1``).

It serves one :class:`~.model.GmailModel` to any number of connections (one
thread each) and implements what an IMAP client of Gmail uses: CAPABILITY,
LOGIN, ID, ENABLE (CONDSTORE), NAMESPACE, LIST/LSUB with special-use
attributes, STATUS, SELECT/EXAMINE (UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ),
(UID) FETCH with ``X-GM-MSGID``, ``X-GM-THRID``, ``X-GM-LABELS``, ``MODSEQ``
and the ``CHANGEDSINCE`` modifier, (UID) STORE of flags and of
``+X-GM-LABELS``/``-X-GM-LABELS``/``X-GM-LABELS``, (UID) SEARCH (``UID``,
``HEADER``, ``X-GM-MSGID``, ``X-GM-THRID``, ``X-GM-LABELS``, a minimal
``X-GM-RAW``, flags, ``NOT``/``OR``), (UID) COPY and MOVE with COPYUID,
(UID) EXPUNGE, APPEND with APPENDUID, CREATE/RENAME/DELETE of labels, IDLE,
UNSELECT, CLOSE, NOOP and LOGOUT. Folders mean what they mean at Gmail (see
:mod:`.model`): copying into a label folder adds the label, expunging from it
removes the label, moving to Trash trashes.

Not offered (as a client would see from CAPABILITY): QRESYNC (Gmail has none),
ESEARCH, COMPRESS, XLIST, QUOTA. Sequence-number EXPUNGE and EXISTS updates are
sent after each command and during IDLE; flag changes by other connections are
not pushed (a client finds them with CHANGEDSINCE, as with Gmail).

``GmailImapServer(user, password).start()`` listens on 127.0.0.1 at a free port.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import socketserver
import threading
from datetime import UTC, datetime
from typing import Any

from imapclient import imap_utf7

from tests.emulators.gmail_imap.model import (
    ALL_MAIL,
    DELIMITER,
    PARENT,
    SYSTEM_FOLDERS,
    SYSTEM_LABELS,
    GmailMessage,
    GmailModel,
)
from tests.emulators.gmail_imap.protocol import Text, astring, parse, parse_set, quote, read_command

__all__ = ["CAPABILITIES", "GmailImapServer"]

CAPABILITIES = (
    "IMAP4rev1 UNSELECT IDLE NAMESPACE ID CHILDREN X-GM-EXT-1 UIDPLUS ENABLE MOVE "
    "CONDSTORE LITERAL+ SPECIAL-USE"
)
PRE_LOGIN = "IMAP4rev1 ID LITERAL+ AUTH=PLAIN"
FLAGS = "(\\Answered \\Flagged \\Draft \\Deleted \\Seen $NotPhishing $Phishing)"
PERMANENT = "(\\Answered \\Flagged \\Draft \\Deleted \\Seen $NotPhishing $Phishing \\*)"
IDLE_POLL = 0.1
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


class Bad(Exception):
    """The command is malformed (answered BAD)."""


class No(Exception):
    """The command is refused (answered NO)."""


def _name(token: object) -> str:
    """A mailbox name token, decoded from modified UTF-7 (``INBOX`` in any case)."""
    if isinstance(token, list):
        raise Bad("a mailbox name was expected")
    raw = bytes(token) if isinstance(token, bytes) else str(token).encode()
    name = str(imap_utf7.decode(raw))
    return "INBOX" if name.upper() == "INBOX" else name


def _encoded(name: str) -> bytes:
    return quote(imap_utf7.encode(name))


def _label_token(label: str) -> bytes:
    if label in SYSTEM_LABELS:
        return label.encode()
    return astring(imap_utf7.encode(label).decode("ascii"))


def _date(when: datetime) -> str:
    when = when.astimezone(UTC)
    return f"{when.day:02d}-{_MONTHS[when.month - 1]}-{when.year} {when:%H:%M:%S} +0000"


def _header_block(raw: bytes) -> bytes:
    end = raw.find(b"\r\n\r\n")
    if end >= 0:
        return raw[: end + 4]
    end = raw.find(b"\n\n")
    return raw[: end + 2] if end >= 0 else raw


def _header_fields(raw: bytes, names: set[str], negate: bool) -> bytes:
    lines = re.split(rb"(?<=\n)", _header_block(raw))
    out: list[bytes] = []
    keep = False
    for line in lines:
        if line in (b"\r\n", b"\n", b""):
            continue
        if line[:1] in (b" ", b"\t"):
            if keep:
                out.append(line)
            continue
        field = line.split(b":", 1)[0].strip().decode("latin-1").upper()
        keep = (field in names) != negate
        if keep:
            out.append(line)
    return b"".join(out) + b"\r\n"


def _literal(data: bytes) -> bytes:
    return b"{%d}\r\n" % len(data) + data


class _Session:
    """One client connection: its login, its selected folder and what it has been told."""

    def __init__(self, server: GmailImapServer, handler: socketserver.StreamRequestHandler) -> None:
        self.server = server
        self.model = server.model
        self.handler = handler
        self.authenticated = False
        self.condstore = False
        self.folder: str | None = None
        self.readonly = True
        self.view: list[int] = []  # the UIDs the client knows, in sequence order
        self.deleted: set[int] = set()  # msgids marked \Deleted in the selected folder

    # -- output -----------------------------------------------------------------

    def send(self, line: bytes) -> None:
        self.handler.wfile.write(line + b"\r\n")

    def flush(self) -> None:
        self.handler.wfile.flush()

    # -- the loop -----------------------------------------------------------------

    def run(self) -> None:
        self.send(b"* OK Gimap ready for requests from 127.0.0.1 mailroom-emulator")
        self.flush()
        while True:
            try:
                line = read_command(self.handler.rfile, self._go_ahead)
            except (OSError, ValueError):
                return
            if line is None:
                return
            if not line.strip():
                continue
            tag, _, rest = line.partition(b" ")
            tag_text = tag.decode("ascii", "replace")
            try:
                tokens = parse(rest)
                if not tokens or not isinstance(tokens[0], str):
                    raise Bad("no command")
                done = self.dispatch(tag_text, tokens)
            except Bad as exc:
                self.send(f"{tag_text} BAD {exc}".encode())
                done = False
            except No as exc:
                self.send(f"{tag_text} NO {exc}".encode())
                done = False
            except (ValueError, KeyError, IndexError) as exc:
                self.send(f"{tag_text} BAD could not parse the command ({exc})".encode())
                done = False
            self.flush()
            if done:
                return

    def _go_ahead(self) -> None:
        self.send(b"+ go ahead")
        self.flush()

    def dispatch(self, tag: str, tokens: list[Any]) -> bool:
        command = tokens[0].upper()
        args = tokens[1:]
        if command == "LOGOUT":
            self.send(b"* BYE LOGOUT Requested")
            self.send(f"{tag} OK 73 good day (Success)".encode())
            return True
        if command == "CAPABILITY":
            caps = CAPABILITIES if self.authenticated else PRE_LOGIN
            self.send(f"* CAPABILITY {caps}".encode())
        elif command == "NOOP" or command == "CHECK":
            pass
        elif command == "ID":
            self.send(b'* ID ("name" "GImap" "vendor" "Google, Inc." "support-url" "none")')
        elif command == "LOGIN":
            if len(args) != 2:
                raise Bad("LOGIN needs a user and a password")
            user, password = (bytes(a) if isinstance(a, bytes) else str(a).encode() for a in args)
            if (user.decode(), password.decode()) != (self.server.user, self.server.password):
                raise No("[AUTHENTICATIONFAILED] Invalid credentials (Failure)")
            self.authenticated = True
            self.send(
                f"{tag} OK [CAPABILITY {CAPABILITIES}] {user.decode()} authenticated".encode()
            )
            return False
        elif not self.authenticated:
            raise Bad("log in first")
        else:
            handler = getattr(self, "do_" + command.lower(), None)
            if handler is None:
                raise Bad(f"unknown command {command}")
            text = handler(tag, args)
            self._report_changes()
            self.send(f"{tag} OK {text or 'Success'}".encode())
            return False
        self.send(f"{tag} OK Success".encode())
        return False

    # -- folder commands ------------------------------------------------------------

    def do_enable(self, tag: str, args: list[Any]) -> str:
        if any(str(a).upper() == "CONDSTORE" for a in args):
            self.condstore = True
            self.send(b"* ENABLED CONDSTORE")
        return "Success"

    def do_namespace(self, tag: str, args: list[Any]) -> str:
        self.send(b'* NAMESPACE (("" "/")) NIL NIL')
        return "Success"

    def _listing(self) -> list[tuple[str, list[str]]]:
        names = self.model.folder_names()
        out: list[tuple[str, list[str]]] = []
        for name in names:
            attrs: list[str] = []
            special = SYSTEM_FOLDERS.get(name, (None, None))[0]
            if special:
                attrs.append(special)
            children = any(n.startswith(name + DELIMITER) for n in names)
            attrs.append("\\HasChildren" if children else "\\HasNoChildren")
            out.append((name, attrs))
        out.insert(1, (PARENT, ["\\Noselect", "\\HasChildren"]))
        return out

    def do_list(self, tag: str, args: list[Any], kind: str = "LIST") -> str:
        if len(args) < 2:
            raise Bad("LIST needs a reference and a pattern")
        pattern = _name(args[1]) if str(args[1]) else ""
        if pattern == "":
            self.send(f'* {kind} (\\Noselect) "/" ""'.encode())
            return "Success"
        regex = re.compile(
            "^" + re.escape(pattern).replace(r"\*", ".*").replace("%", "[^/]*") + "$",
            re.IGNORECASE if pattern.upper().startswith("INBOX") else 0,
        )
        for name, attrs in self._listing():
            if regex.match(name):
                self.send(f'* {kind} ({" ".join(attrs)}) "/" '.encode() + _encoded(name))
        return "Success"

    def do_lsub(self, tag: str, args: list[Any]) -> str:
        return self.do_list(tag, args, "LSUB")

    def do_subscribe(self, tag: str, args: list[Any]) -> str:
        return "Success"

    do_unsubscribe = do_subscribe

    def _require(self, name: str) -> None:
        if not self.model.has_folder(name):
            raise No(f"[NONEXISTENT] Unknown Mailbox: {name} (Failure)")

    def do_status(self, tag: str, args: list[Any]) -> str:
        name = _name(args[0])
        self._require(name)
        wanted = [str(x).upper() for x in args[1]]
        with self.model.lock:
            info = self.model.status(name)
            uids = self.model.folder_uids(name)
            unseen = sum(
                1 for m in uids.values() if "\\Seen" not in self.model.message(m).imap_flags()
            )
            values = {
                "MESSAGES": len(uids),
                "UIDNEXT": info.uidnext,
                "UIDVALIDITY": info.uidvalidity,
                "UNSEEN": unseen,
                "RECENT": 0,
                "HIGHESTMODSEQ": self.model.highest_modseq(name),
            }
        items = " ".join(f"{k} {values[k]}" for k in wanted if k in values)
        self.send(b"* STATUS " + _encoded(name) + f" ({items})".encode())
        return "Success"

    def do_select(self, tag: str, args: list[Any], readonly: bool = False) -> str:
        name = _name(args[0])
        self.folder = None
        self._require(name)
        if len(args) > 1 and isinstance(args[1], list):
            self.condstore = self.condstore or any(str(a).upper() == "CONDSTORE" for a in args[1])
        with self.model.lock:
            info = self.model.status(name)
            self.view = list(self.model.folder_uids(name))
            highest = self.model.highest_modseq(name)
            validity, uidnext = info.uidvalidity, info.uidnext
        self.folder, self.readonly, self.deleted = name, readonly, set()
        self.send(f"* FLAGS {FLAGS}".encode())
        self.send(
            f"* OK [PERMANENTFLAGS {'()' if readonly else PERMANENT}] Flags permitted.".encode()
        )
        self.send(f"* OK [UIDVALIDITY {validity}] UIDs valid.".encode())
        self.send(f"* {len(self.view)} EXISTS".encode())
        self.send(b"* 0 RECENT")
        self.send(f"* OK [UIDNEXT {uidnext}] Predicted next UID.".encode())
        self.send(f"* OK [HIGHESTMODSEQ {highest}]".encode())
        return f"[{'READ-ONLY' if readonly else 'READ-WRITE'}] {name} selected. (Success)"

    def do_examine(self, tag: str, args: list[Any]) -> str:
        return self.do_select(tag, args, readonly=True)

    def do_unselect(self, tag: str, args: list[Any]) -> str:
        self.folder, self.view = None, []
        return "Returned to authenticated state. (Success)"

    def do_close(self, tag: str, args: list[Any]) -> str:
        if self.folder is not None and not self.readonly:
            for msgid in sorted(self.deleted):
                self.model.expunge_from(msgid, self.folder)
        return self.do_unselect(tag, args)

    def do_create(self, tag: str, args: list[Any]) -> str:
        name = _name(args[0]).rstrip(DELIMITER)
        if self.model.has_folder(name) or name.startswith(PARENT):
            raise No(f"[ALREADYEXISTS] Folder name conflicts with existing folder name. {name}")
        self.model.create_label(name)
        return "Success"

    def do_delete(self, tag: str, args: list[Any]) -> str:
        name = _name(args[0])
        self._require(name)
        if name in SYSTEM_FOLDERS:
            raise No("[CANNOT] Cannot delete a system folder (Failure)")
        self.model.delete_label(name)
        return "Success"

    def do_rename(self, tag: str, args: list[Any]) -> str:
        old, new = _name(args[0]), _name(args[1])
        self._require(old)
        if old in SYSTEM_FOLDERS or new in SYSTEM_FOLDERS or self.model.has_folder(new):
            raise No("[CANNOT] Cannot rename to or from this name (Failure)")
        self.model.rename_label(old, new)
        return "Success"

    def do_append(self, tag: str, args: list[Any]) -> str:
        name = _name(args[0])
        self._require(name)
        flags: list[str] = []
        raw = args[-1]
        if not isinstance(raw, Text):
            raise Bad("APPEND needs a message literal")
        for arg in args[1:-1]:
            if isinstance(arg, list):
                flags = [str(f) for f in arg]
        msgid = self.model.append(name, bytes(raw), flags)
        with self.model.lock:
            info = self.model.status(name)
            uid = info.uids.get(msgid)
            validity = info.uidvalidity
        return f"[APPENDUID {validity} {uid}] (Success)"

    # -- selected state ----------------------------------------------------------

    def _selected(self, write: bool = False) -> str:
        if self.folder is None:
            raise Bad("no mailbox selected")
        if write and self.readonly:
            raise No("the mailbox is read-only")
        return self.folder

    def _report_changes(self) -> None:
        """Tell the client about messages that left (EXPUNGE) or entered (EXISTS) its folder."""
        if self.folder is None:
            return
        current = self.model.folder_uids(self.folder)
        if not self.model.has_folder(self.folder):
            current = {}
        for position in range(len(self.view) - 1, -1, -1):
            if self.view[position] not in current:
                self.send(f"* {position + 1} EXPUNGE".encode())
                del self.view[position]
        known = set(self.view)
        new = [uid for uid in current if uid not in known]
        if new:
            self.view.extend(sorted(new))
            self.send(f"* {len(self.view)} EXISTS".encode())

    def _targets(self, spec: str, by_uid: bool) -> list[tuple[int, int, int]]:
        """(sequence number, UID, msgid) of the messages a set names, ascending."""
        folder = self._selected()
        current = self.model.folder_uids(folder)
        visible = [uid for uid in self.view if uid in current]
        if by_uid:
            highest = visible[-1] if visible else 0
            wanted = parse_set(spec, highest, visible)
            return [(i + 1, uid, current[uid]) for i, uid in enumerate(visible) if uid in wanted]
        numbers = parse_set(spec, len(visible), range(1, len(visible) + 1))
        return [(n, visible[n - 1], current[visible[n - 1]]) for n in sorted(numbers)]

    def do_uid(self, tag: str, args: list[Any]) -> str:
        if not args:
            raise Bad("UID needs a command")
        sub = str(args[0]).upper()
        handler = {
            "FETCH": self._fetch,
            "STORE": self._store,
            "SEARCH": self._search,
            "COPY": self._copy,
            "MOVE": self._move,
            "EXPUNGE": self._uid_expunge,
        }.get(sub)
        if handler is None:
            raise Bad(f"unknown UID command {sub}")
        return handler(args[1:], by_uid=True)

    def do_fetch(self, tag: str, args: list[Any]) -> str:
        return self._fetch(args, by_uid=False)

    def do_store(self, tag: str, args: list[Any]) -> str:
        return self._store(args, by_uid=False)

    def do_search(self, tag: str, args: list[Any]) -> str:
        return self._search(args, by_uid=False)

    def do_copy(self, tag: str, args: list[Any]) -> str:
        return self._copy(args, by_uid=False)

    def do_move(self, tag: str, args: list[Any]) -> str:
        return self._move(args, by_uid=False)

    def do_expunge(self, tag: str, args: list[Any]) -> str:
        folder = self._selected(write=True)
        for msgid in sorted(self.deleted):
            self.model.expunge_from(msgid, folder)
        self.deleted.clear()
        return "Success"

    def _uid_expunge(self, args: list[Any], by_uid: bool) -> str:
        folder = self._selected(write=True)
        for _seq, _uid, msgid in self._targets(str(args[0]), True):
            if msgid in self.deleted:
                self.model.expunge_from(msgid, folder)
                self.deleted.discard(msgid)
        return "Success"

    # -- FETCH ---------------------------------------------------------------------

    def _fetch(self, args: list[Any], by_uid: bool) -> str:
        self._selected()
        spec, items = str(args[0]), args[1]
        wanted = [str(i) for i in (items if isinstance(items, list) else [items])]
        macros = {
            "ALL": ["FLAGS", "INTERNALDATE", "RFC822.SIZE"],
            "FAST": ["FLAGS", "INTERNALDATE", "RFC822.SIZE"],
        }
        wanted = [x for w in wanted for x in macros.get(w.upper(), [w])]
        changed_since: int | None = None
        if len(args) > 2 and isinstance(args[2], list):
            modifiers = [str(m).upper() for m in args[2]]
            if "CHANGEDSINCE" in modifiers:
                changed_since = int(modifiers[modifiers.index("CHANGEDSINCE") + 1])
                self.condstore = True
        if by_uid and not any(w.upper() == "UID" for w in wanted):
            wanted.insert(0, "UID")
        if changed_since is not None and not any(w.upper() == "MODSEQ" for w in wanted):
            wanted.append("MODSEQ")
        with self.model.lock:
            for seq, uid, msgid in self._targets(spec, by_uid):
                message = self.model.message(msgid)
                if changed_since is not None and message.modseq <= changed_since:
                    continue
                parts = [self._item(w, uid, message) for w in wanted]
                self.send(f"* {seq} FETCH (".encode() + b" ".join(parts) + b")")
        return "Success"

    def _item(self, item: str, uid: int, message: GmailMessage) -> bytes:
        upper = item.upper()
        if upper == "UID":
            return f"UID {uid}".encode()
        if upper == "FLAGS":
            return self._flags(message)
        if upper == "INTERNALDATE":
            return f'INTERNALDATE "{_date(message.internaldate)}"'.encode()
        if upper == "RFC822.SIZE":
            return f"RFC822.SIZE {len(message.raw)}".encode()
        if upper == "X-GM-MSGID":
            return f"X-GM-MSGID {message.msgid}".encode()
        if upper == "X-GM-THRID":
            return f"X-GM-THRID {message.thrid}".encode()
        if upper == "X-GM-LABELS":
            return self._labels(message)
        if upper == "MODSEQ":
            return f"MODSEQ ({message.modseq})".encode()
        if upper == "RFC822":
            self._mark_seen(message)
            return b"RFC822 " + _literal(message.raw)
        if upper.startswith(("BODY[", "BODY.PEEK[")):
            peek = upper.startswith("BODY.PEEK[")
            section = item[item.index("[") + 1 : item.rindex("]")]
            if not peek:
                self._mark_seen(message)
            return f"BODY[{section}] ".encode() + _literal(self._section(message, section))
        raise Bad(f"unsupported FETCH item {item}")

    def _mark_seen(self, message: GmailMessage) -> None:
        if not self.readonly and "\\Seen" not in message.flags:
            self.model.set_flags(message.msgid, add=["\\Seen"])

    def _section(self, message: GmailMessage, section: str) -> bytes:
        upper = section.upper()
        if upper == "":
            return message.raw
        if upper == "HEADER":
            return _header_block(message.raw)
        if upper == "TEXT":
            return message.raw[len(_header_block(message.raw)) :]
        match = re.fullmatch(r"HEADER\.FIELDS(\.NOT)?\s*\(([^)]*)\)", upper)
        if match:
            names = set(match.group(2).split())
            return _header_fields(message.raw, names, negate=bool(match.group(1)))
        raise Bad(f"unsupported BODY section {section}")

    def _flags(self, message: GmailMessage) -> bytes:
        flags = sorted(message.imap_flags())
        if message.msgid in self.deleted:
            flags.append("\\Deleted")
        return f"FLAGS ({' '.join(flags)})".encode()

    def _labels(self, message: GmailMessage) -> bytes:
        tokens = [_label_token(label) for label in sorted(message.labels)]
        return b"X-GM-LABELS (" + b" ".join(tokens) + b")"

    # -- STORE ---------------------------------------------------------------------

    def _store(self, args: list[Any], by_uid: bool) -> str:
        self._selected(write=True)
        spec = str(args[0])
        rest = args[1:]
        if rest and isinstance(rest[0], list):  # (UNCHANGEDSINCE n): accepted, not checked
            rest = rest[1:]
        action = str(rest[0]).upper()
        values = rest[1] if len(rest) > 1 else []
        items = [
            bytes(v).decode() if isinstance(v, bytes) else str(v)
            for v in (values if isinstance(values, list) else [values])
        ]
        silent = action.endswith(".SILENT")
        action = action.removesuffix(".SILENT")
        sign = action[0] if action[0] in "+-" else ""
        what = action.lstrip("+-")
        with self.model.lock:
            for seq, uid, msgid in self._targets(spec, by_uid):
                if what == "FLAGS":
                    self._store_flags(msgid, sign, items)
                    reply = self._flags(self.model.message(msgid))
                elif what == "X-GM-LABELS":
                    self._store_labels(
                        msgid, sign, [str(imap_utf7.decode(i.encode())) for i in items]
                    )
                    reply = self._labels(self.model.message(msgid))
                else:
                    raise Bad(f"unsupported STORE item {what}")
                if not silent:
                    self.send(f"* {seq} FETCH (UID {uid} ".encode() + reply + b")")
        return "Success"

    def _store_flags(self, msgid: int, sign: str, flags: list[str]) -> None:
        message = self.model.message(msgid)
        if "\\Deleted" in flags:
            if sign == "-":
                self.deleted.discard(msgid)
            else:
                self.deleted.add(msgid)
        elif sign == "":
            self.deleted.discard(msgid)
        others = [f for f in flags if f != "\\Deleted"]
        if sign == "+":
            self.model.set_flags(msgid, add=others)
        elif sign == "-":
            self.model.set_flags(msgid, remove=others)
        else:
            current = message.imap_flags()
            self.model.set_flags(msgid, add=others, remove=[f for f in current if f not in others])

    def _store_labels(self, msgid: int, sign: str, labels: list[str]) -> None:
        message = self.model.message(msgid)
        if sign == "+":
            self.model.relabel(msgid, add=labels)
        elif sign == "-":
            self.model.relabel(msgid, remove=labels)
        else:
            self.model.relabel(
                msgid, add=labels, remove=[x for x in message.labels if x not in labels]
            )

    # -- SEARCH --------------------------------------------------------------------

    def _search(self, args: list[Any], by_uid: bool) -> str:
        self._selected()
        tokens = list(args)
        if tokens and str(tokens[0]).upper() == "CHARSET":
            tokens = tokens[2:]
        with self.model.lock:
            candidates = self._targets("1:*", True) if self.view else []
            hits = [
                (seq, uid)
                for seq, uid, msgid in candidates
                if self._matches_all(tokens, seq, uid, self.model.message(msgid))
            ]
        numbers = " ".join(str(uid if by_uid else seq) for seq, uid in hits)
        self.send(f"* SEARCH {numbers}".rstrip().encode())
        return "SEARCH completed (Success)"

    def _matches_all(self, tokens: list[Any], seq: int, uid: int, message: GmailMessage) -> bool:
        queue = list(tokens)
        while queue:
            if not self._match_one(queue, seq, uid, message):
                return False
        return True

    def _match_one(self, queue: list[Any], seq: int, uid: int, message: GmailMessage) -> bool:
        token = queue.pop(0)
        if isinstance(token, list):
            return self._matches_all(token, seq, uid, message)
        key = str(token).upper() if not isinstance(token, Text) else ""
        flags = message.imap_flags() | ({"\\Deleted"} if message.msgid in self.deleted else set())

        def text() -> str:
            value = queue.pop(0)
            return bytes(value).decode() if isinstance(value, bytes) else str(value)

        simple = {
            "ALL": True,
            "SEEN": "\\Seen" in flags,
            "UNSEEN": "\\Seen" not in flags,
            "FLAGGED": "\\Flagged" in flags,
            "UNFLAGGED": "\\Flagged" not in flags,
            "DELETED": "\\Deleted" in flags,
            "UNDELETED": "\\Deleted" not in flags,
            "ANSWERED": "\\Answered" in flags,
            "UNANSWERED": "\\Answered" not in flags,
        }
        if key in simple:
            return simple[key]
        if key == "NOT":
            return not self._match_one(queue, seq, uid, message)
        if key == "OR":
            left = self._match_one(queue, seq, uid, message)
            right = self._match_one(queue, seq, uid, message)
            return left or right
        if key == "UID":
            return uid in parse_set(text(), self.view[-1] if self.view else 0, [uid])
        if key == "HEADER":
            name, value = text(), text()
            found = _header_fields(message.raw, {name.upper()}, negate=False)
            body = found.split(b":", 1)[1] if b":" in found else b""
            return value.lower().encode() in body.lower() if value else bool(found.strip())
        if key == "X-GM-MSGID":
            return message.msgid == int(text())
        if key == "X-GM-THRID":
            return message.thrid == int(text())
        if key == "X-GM-LABELS":
            return str(imap_utf7.decode(text().encode())) in message.labels
        if key == "X-GM-RAW":
            return self._raw_query(text(), message)
        if key == "MODSEQ":
            return message.modseq >= int(text())
        if re.fullmatch(r"[0-9*:,]+", key):
            return seq in parse_set(key, len(self.view), [seq])
        raise Bad(f"unsupported SEARCH key {token}")

    def _raw_query(self, query: str, message: GmailMessage) -> bool:
        """A minimal Gmail search: ``label:x``, ``in:inbox|trash|spam|anywhere``,
        ``is:starred|unread|read``, ``rfc822msgid:id``; every term must match."""
        for term in query.split():
            key, _, value = term.partition(":")
            key, value = key.lower(), value.strip('"')
            if key == "label":
                ok = value in message.labels or value.replace("-", "/") in message.labels
            elif key == "in":
                ok = {
                    "inbox": "\\Inbox" in message.labels and message.place == "all",
                    "trash": message.place == "trash",
                    "spam": message.place == "spam",
                    "anywhere": True,
                }.get(value.lower(), False)
            elif key == "is":
                ok = {
                    "starred": "\\Starred" in message.labels,
                    "unread": "\\Seen" not in message.flags,
                    "read": "\\Seen" in message.flags,
                    "important": "\\Important" in message.labels,
                }.get(value.lower(), False)
            elif key == "rfc822msgid":
                ok = message.message_id == value.strip("<>")
            else:
                ok = False
            if not ok:
                return False
        return True

    # -- COPY / MOVE ---------------------------------------------------------------

    def _copy_each(self, args: list[Any], by_uid: bool) -> tuple[str, list[int], str]:
        target = _name(args[1])
        self._require(target)
        targets = self._targets(str(args[0]), by_uid)
        sources: list[int] = []
        dest: list[int] = []
        with self.model.lock:
            for _seq, uid, msgid in targets:
                self.model.copy_into(msgid, target)
                new_uid = self.model.status(target).uids.get(msgid)
                if new_uid is not None:
                    sources.append(uid)
                    dest.append(new_uid)
            validity = self.model.status(target).uidvalidity
        code = ""
        if sources:
            code = f"[COPYUID {validity} {','.join(map(str, sources))} {','.join(map(str, dest))}]"
        return target, [m for _s, _u, m in targets], code

    def _copy(self, args: list[Any], by_uid: bool) -> str:
        self._selected()
        _target, _moved, code = self._copy_each(args, by_uid)
        return f"{code} (Success)".strip()

    def _move(self, args: list[Any], by_uid: bool) -> str:
        source = self._selected(write=True)
        _target, moved, code = self._copy_each(args, by_uid)
        if code:
            self.send(f"* OK {code}".encode())
        # All Mail shows every message not in Trash/Spam: moving out of it only adds the
        # target's label (copying into Trash/Spam already took the message out).
        if source != ALL_MAIL:
            for msgid in moved:
                self.model.expunge_from(msgid, source)
        return "Success"

    # -- IDLE ----------------------------------------------------------------------

    def do_idle(self, tag: str, args: list[Any]) -> str:
        self.send(b"+ idling")
        self.flush()
        version = self.model.version
        sock = self.handler.connection
        while True:
            ready, _w, _x = select.select([sock], [], [], IDLE_POLL)
            if ready:
                line = self.handler.rfile.readline()
                if not line or line.strip().upper() == b"DONE":
                    break
            if self.model.version != version:
                version = self.model.version
                self._report_changes()
                self.flush()
        return "IDLE terminated (Success)"


class _Handler(socketserver.StreamRequestHandler):
    server: _TCPServer

    def handle(self) -> None:
        session = _Session(self.server.owner, self)
        self.server.owner.sessions.add(self.connection)
        try:
            session.run()
        except (OSError, ConnectionError):
            pass
        finally:
            self.server.owner.sessions.discard(self.connection)


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: GmailImapServer


class GmailImapServer:
    """The emulator on 127.0.0.1: ``start()``, ``stop()``, or use it as a context manager."""

    def __init__(
        self,
        user: str = "me@gmail.com",
        password: str = "app-password",
        *,
        model: GmailModel | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.user = user
        self.password = password
        self.model = model or GmailModel()
        self.host = host
        self._requested_port = port
        self.port = port
        self.sessions: set[socket.socket] = set()
        self._server: _TCPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> GmailImapServer:
        """Listen and serve in a background thread."""
        server = _TCPServer((self.host, self._requested_port), _Handler)
        server.owner = self
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, name="gmail-imap", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop every open connection."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        for sock in list(self.sessions):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._server = None

    def drop_connections(self) -> None:
        """Cut every open connection (as a network failure would)."""
        for sock in list(self.sessions):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> GmailImapServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
