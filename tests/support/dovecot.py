"""A private, throw-away Dovecot IMAP server for tests.

Usage::

    with DovecotServer(tmp_path) as server:
        server.add_user("alice", "secret")
        client = IMAPClient(server.host, port=server.port, ssl=False)
        client.login("alice", "secret")

The server is started as ``dovecot -F -c CONF`` in a background subprocess (no systemd, no
system configuration is read or written) and listens on 127.0.0.1 at a free port.

Facts about Dovecot (2.3.19, Debian 12) that shaped this module, learnt the hard way:

* Mail processes never run as root.  With ``mail_uid = root`` login fails with "Mail access
  for users with UID 0 not permitted"; after ``first_valid_uid = 0`` and
  ``first_valid_gid = 0`` it still fails with "Couldn't drop privileges: Mail access not
  allowed for root" (hard-coded for the imap service).  So when the tests run as root the
  mail is owned by ``nobody`` and the Maildirs are chown'ed to it; when they run as a normal
  user everything (mail, auth, login) runs as that user.
* The auth process runs as ``default_internal_user`` (``dovecot``) and reads the passwd-file
  itself (passwd-file is not a blocking driver, so no root auth-worker is involved).  The
  file and every directory above it must be readable/traversable by that user.  pytest's
  ``tmp_path`` lives under ``/tmp/pytest-of-root`` (mode 0700), so the server keeps its
  files in its own ``mkdtemp`` directory under /tmp with mode 0755 and ``tmp_path / "dovecot"``
  becomes a symlink to it (the log is copied back into ``tmp_path`` on cleanup).
* ``base_dir`` holds UNIX sockets (``login/imap``, ``token-login/...``, ``auth-login``...) and
  a UNIX socket path is limited to 108 bytes; pytest's ``tmp_path`` is often longer than
  that allows, another reason for a short private directory.
* The built-in default is ``ssl = yes`` with no certificate, which is a fatal config error:
  ``ssl = no`` is needed.  Dovecot treats connections from 127.0.0.1 as "secured" anyway,
  but ``disable_plaintext_auth = no`` keeps LOGIN working whatever the address.
* ``state_dir`` defaults to /var/lib/dovecot, where the master records itself in an
  ``instances`` file: it is pointed into the private directory so that the system's state is
  not touched.  A unique ``instance_name`` makes the processes show up as
  ``dovecot-<instance>/imap-login`` etc., which helps finding leftovers.
* The greeting/pre-login CAPABILITY is short (IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE
  IDLE LITERAL+ AUTH=...).  CONDSTORE, QRESYNC, MOVE, SPECIAL-USE etc. only appear after
  LOGIN (in the tagged OK's CAPABILITY response code, which IMAPClient picks up).
* ``auto = subscribe`` special-use mailboxes are listed by LIST (with their special-use flag)
  before they exist on disk; the Maildir++ directory (``.Sent`` ...) is created lazily.
* A passwd-file is re-read when its mtime or size changes, but Dovecot stat()s it at most
  once per second: a user appended to a shared passwd-file right after a login is "unknown"
  for up to a second.  So every user gets a file of its own (``passwd.d/%u``): a new user is
  a new path, loaded on its first lookup, and can log in at once (the auth cache is off by
  default).  Changing an existing user's password while running waits 1.1 s for that reason.
* A failed login is answered after ``auth_failure_delay`` (2 s), and anvil adds a per-IP
  penalty doubling up to 15 s, so a few failed logins from 127.0.0.1 made every later failure
  take 4.5 s.  ``login_trusted_networks = 127.0.0.0/8`` did NOT lift that penalty here; the
  documented switch is ``unix_listener anvil-auth-penalty { mode = 0 }`` in ``service
  anvil``.  With ``auth_failure_delay = 0`` a failure still takes about 0.5 s.
* Login processes are chrooted into ``base_dir/login`` by default; that only works as root,
  so the chroots are switched off when running as a normal user.  Some unix sockets (stats,
  dict, imap-hibernate) are chown'ed to ``default_internal_group`` (``dovecot``), which a
  normal user may not do either: it is set to the user's own group then.
* Maildir files written by Dovecot (APPEND, COPY) have bare LF line ends; IMAP FETCH adds
  the CRs back.  Files dropped in by ``deliver()`` are served as they are (CRLF or LF).
* SIGTERM to the master makes it exit after about a second, but despite
  ``shutdown_clients = yes`` an open imap session (and the log and stats processes serving
  it) kept running for another ~10 s, until it noticed the master was gone.  The master and
  its children share one process group (the master is started in a new session), so
  ``stop()`` SIGTERMs the whole group once the master is gone (SIGKILL after a timeout) and
  waits until no live process is left in it.  PID 1 here reaps orphans only lazily, so
  zombies are ignored when checking for leftovers.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import weakref
from pathlib import Path
from types import TracebackType
from typing import IO, Self

__all__ = [
    "SPECIAL_USE_MAILBOXES",
    "DovecotServer",
    "DovecotUnavailableError",
    "find_dovecot",
    "group_members",
]

#: Mailboxes created for every user, with their RFC 6154 special-use flag.
SPECIAL_USE_MAILBOXES: dict[str, str] = {
    "Sent": "\\Sent",
    "Drafts": "\\Drafts",
    "Trash": "\\Trash",
    "Junk": "\\Junk",
    "Archive": "\\Archive",
}

_DOVECOT_CANDIDATES = ("/usr/sbin/dovecot", "/usr/local/sbin/dovecot")


class DovecotUnavailableError(RuntimeError):
    """Dovecot is not installed here (``apt-get install dovecot-imapd``)."""


def find_dovecot() -> str | None:
    """Return the path of the ``dovecot`` binary, or None when it is not installed."""
    found = shutil.which("dovecot")
    if found:
        return found
    for candidate in _DOVECOT_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _short_tmp_root() -> str:
    # /tmp keeps socket paths short even when $TMPDIR is long.
    if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK):
        return "/tmp"
    return tempfile.gettempdir()


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Stop a dovecot master and make sure its whole process group is gone."""
    pgid = proc.pid
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            proc.wait(timeout=timeout)
    # The master exits after about a second, but imap sessions (and the log and stats
    # processes serving them) linger ~10 s until they notice: SIGTERM them right away.
    if group_members(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed = False
    while group_members(pgid):
        if time.monotonic() > deadline:
            if killed:
                raise RuntimeError(f"dovecot process group {pgid} did not exit")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            killed = True
            deadline = time.monotonic() + 2.0
        time.sleep(0.05)


def group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes whose process group is ``pgid``, from /proc."""
    members: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def _finalize(state: dict[str, object], home: Path) -> None:
    proc = state.get("proc")
    if isinstance(proc, subprocess.Popen):
        with contextlib.suppress(Exception):
            _terminate(proc, 5.0)
    log = state.get("log")
    if log is not None and hasattr(log, "close"):
        log.close()
    shutil.rmtree(home, ignore_errors=True)


class DovecotServer:
    """A private Dovecot IMAP server on 127.0.0.1 (a context manager).

    ``tmp_path`` is a scratch directory owned by the caller (pytest's ``tmp_path``); the
    server's own files live in a private directory that ``tmp_path / "dovecot"`` links to.
    ``stop()`` stops the server but keeps its files (``start()`` again restarts it with the
    same mail); leaving the ``with`` block (or ``cleanup()``) also deletes them.
    """

    def __init__(
        self,
        tmp_path: Path,
        *,
        separator: str = ".",
        startup_timeout: float = 10.0,
        dovecot_binary: str | None = None,
        extra_config: str = "",
    ) -> None:
        binary = dovecot_binary or find_dovecot()
        if binary is None:
            raise DovecotUnavailableError(
                "dovecot is not installed (apt-get install dovecot-imapd)"
            )
        self.binary: str = binary
        self.host: str = "127.0.0.1"
        self.port: int = 0
        self.separator = separator
        self.startup_timeout = startup_timeout
        self.extra_config = extra_config
        self.tmp_path = Path(tmp_path)
        self.instance_name = f"mailroom-test-{uuid.uuid4().hex[:10]}"

        self.is_root = os.geteuid() == 0
        if self.is_root:
            mail_user = pwd.getpwnam("nobody")
            self.mail_uid, self.mail_gid = mail_user.pw_uid, mail_user.pw_gid
            self.internal_user, self.login_user = "dovecot", "dovenull"
            for name in (self.internal_user, self.login_user):
                try:
                    pwd.getpwnam(name)
                except KeyError as exc:
                    raise DovecotUnavailableError(
                        f"system user {name!r} missing (it comes with dovecot-core)"
                    ) from exc
        else:
            me = pwd.getpwuid(os.getuid())
            self.mail_uid, self.mail_gid = me.pw_uid, os.getgid()
            self.internal_user = self.login_user = me.pw_name
        self.mail_group = grp.getgrgid(self.mail_gid).gr_name

        self.home = Path(tempfile.mkdtemp(prefix="mrdc-", dir=_short_tmp_root()))
        self.home.chmod(0o755)
        self.base_dir = self.home / "run"
        self.state_dir = self.home / "state"
        self.mail_root = self.home / "mail"
        self.config_path = self.home / "dovecot.conf"
        self.passwd_dir = self.home / "passwd.d"
        self.log_path = self.home / "dovecot.log"
        self.stdout_path = self.home / "dovecot.stdout"
        for directory in (self.state_dir, self.mail_root, self.passwd_dir):
            directory.mkdir(mode=0o755)
            directory.chmod(0o755)
        self._users: dict[str, str] = {}
        self._last_pgid: int | None = None
        self.tmp_path.mkdir(parents=True, exist_ok=True)
        link = self.tmp_path / "dovecot"
        if not link.exists() and not link.is_symlink():
            with contextlib.suppress(OSError):
                link.symlink_to(self.home, target_is_directory=True)

        # Shared with the finalizer, which must not hold a reference to self.
        self._state: dict[str, object] = {}
        self._finalizer = weakref.finalize(self, _finalize, self._state, self.home)

    # ------------------------------------------------------------------ users

    def add_user(self, name: str, password: str) -> None:
        """Create (or change the password of) a user; works before and after start()."""
        for value in (name, password):
            if not value or any(ch in value for ch in ":\n\r\0"):
                raise ValueError(f"invalid user name or password: {value!r}")
        if "/" in name or name.startswith("."):
            raise ValueError(f"invalid user name: {name!r}")
        changed = self._users.get(name, password) != password
        self._users[name] = password
        maildir = self.maildir(name)
        for path in (maildir.parent, maildir, maildir / "cur", maildir / "new", maildir / "tmp"):
            if not path.exists():
                path.mkdir(mode=0o700 if path != maildir.parent else 0o755)
                self._chown(path)
        self._write_passwd(name, password)
        if changed and self.running:
            time.sleep(1.1)  # Dovecot stat()s a passwd-file at most once a second.

    @property
    def users(self) -> dict[str, str]:
        """User name -> password of every user added so far."""
        return dict(self._users)

    def maildir(self, user: str) -> Path:
        """The Maildir (INBOX) of ``user``; folders are Maildir++ ``.Name`` subdirectories."""
        return self.mail_root / user / "Maildir"

    def folder_path(self, user: str, folder: str = "INBOX") -> Path:
        """The Maildir directory holding IMAP folder ``folder`` of ``user``."""
        if folder.upper() == "INBOX":
            return self.maildir(user)
        parts = folder.split(self.separator)
        return self.maildir(user) / ("." + ".".join(parts))

    def deliver(self, user: str, message: bytes, folder: str = "INBOX", flags: str = "") -> Path:
        """Drop ``message`` into a folder behind Dovecot's back (as an MDA would).

        Without flags the message goes to ``new/`` (it will be \\Recent and unseen); with
        Maildir flags such as ``"S"`` or ``"FS"`` it goes to ``cur/`` with that info suffix.
        """
        if user not in self._users:
            raise KeyError(user)
        folder_dir = self.folder_path(user, folder)
        for path in (folder_dir, folder_dir / "cur", folder_dir / "new", folder_dir / "tmp"):
            if not path.exists():
                path.mkdir(mode=0o700)
                self._chown(path)
        if folder_dir != self.maildir(user):
            marker = folder_dir / "maildirfolder"
            if not marker.exists():
                marker.touch(mode=0o600)
                self._chown(marker)
        unique = f"{time.time_ns() // 1_000_000_000}.M{uuid.uuid4().hex}P{os.getpid()}.mailroom"
        tmp_file = folder_dir / "tmp" / unique
        tmp_file.write_bytes(message)
        tmp_file.chmod(0o600)
        self._chown(tmp_file)
        if flags:
            final = folder_dir / "cur" / f"{unique}:2,{''.join(sorted(set(flags)))}"
        else:
            final = folder_dir / "new" / unique
        os.replace(tmp_file, final)
        return final

    def _chown(self, path: Path) -> None:
        if self.is_root:
            os.chown(path, self.mail_uid, self.mail_gid)

    def _write_passwd(self, name: str, password: str) -> None:
        target = self.passwd_dir / name
        tmp = self.passwd_dir / f".{name}.new"
        tmp.write_text(f"{name}:{{PLAIN}}{password}:::::\n", encoding="utf-8")
        tmp.chmod(0o644)
        os.replace(tmp, target)

    # ----------------------------------------------------------------- config

    def render_config(self) -> str:
        """The complete dovecot.conf for the current port and paths."""
        login_chroot = "" if self.is_root else "  chroot =\n"
        # As a normal user the unix sockets can only be given our own group.
        internal_group = "" if self.is_root else f"default_internal_group = {self.mail_group}\n"
        mailboxes = "".join(
            f"  mailbox {name} {{\n    special_use = {flag}\n    auto = subscribe\n  }}\n"
            for name, flag in SPECIAL_USE_MAILBOXES.items()
        )
        return f"""# Generated by tests/support/dovecot.py -- a private test server.
base_dir = {self.base_dir}
state_dir = {self.state_dir}
instance_name = {self.instance_name}
protocols = imap
listen = 127.0.0.1
shutdown_clients = yes

log_path = {self.log_path}
auth_verbose = yes

ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
# Failed logins are part of the tests: no 2 s failure delay, no per-IP penalty (see above).
auth_failure_delay = 0

default_internal_user = {self.internal_user}
default_login_user = {self.login_user}
{internal_group}mail_uid = {self.mail_uid}
mail_gid = {self.mail_gid}
first_valid_uid = {self.mail_uid}
first_valid_gid = {self.mail_gid}
mail_location = maildir:~/Maildir
mail_fsync = never

passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {self.passwd_dir}/%u
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {self.passwd_dir}/%u
  default_fields = uid={self.mail_uid} gid={self.mail_gid} home={self.mail_root}/%u
}}

namespace inbox {{
  inbox = yes
  prefix =
  separator = {self.separator}
{mailboxes}}}

protocol imap {{
  mail_max_userip_connections = 1000
}}

service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    port = 0
  }}
{login_chroot}}}
service anvil {{
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
{login_chroot}}}
service imap-urlauth-login {{
{login_chroot}}}
{self.extra_config}
"""

    # -------------------------------------------------------------- lifecycle

    @property
    def running(self) -> bool:
        proc = self._state.get("proc")
        return isinstance(proc, subprocess.Popen) and proc.poll() is None

    @property
    def pid(self) -> int | None:
        proc = self._state.get("proc")
        return proc.pid if isinstance(proc, subprocess.Popen) else None

    def start(self) -> Self:
        """Start the server (no-op when running); returns once it greets on its port."""
        if self.running:
            return self
        last_error: Exception | None = None
        for _attempt in range(3):
            self.port = _free_port()
            try:
                self._start_once()
                return self
            except _PortTakenError as exc:  # someone grabbed the port in between
                last_error = exc
        raise RuntimeError(f"dovecot could not bind a port: {last_error}")

    def _start_once(self) -> None:
        self.config_path.write_text(self.render_config(), encoding="utf-8")
        self.config_path.chmod(0o644)
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        # Closed by stop()/_reap(), so no context manager here.
        stdout: IO[bytes] = open(self.stdout_path, "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            [self.binary, "-F", "-c", str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
        self._state["proc"] = proc
        self._state["log"] = stdout
        self._last_pgid = proc.pid
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if proc.poll() is not None:
                output = self._tail(log_offset)
                self._reap()
                if "Address already in use" in output:
                    raise _PortTakenError(output)
                raise RuntimeError(f"dovecot exited with {proc.returncode}:\n{output}")
            if self._greets():
                return
            if time.monotonic() > deadline:
                output = self._tail(log_offset)
                self._reap()
                raise RuntimeError(
                    f"dovecot did not answer on port {self.port} within "
                    f"{self.startup_timeout}s:\n{output}"
                )
            time.sleep(0.05)

    def _greets(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=2.0) as sock:
                greeting = sock.recv(1024)
                with contextlib.suppress(OSError):
                    sock.sendall(b"x LOGOUT\r\n")
                return greeting.startswith(b"* OK")
        except OSError:
            return False

    def _tail(self, log_offset: int) -> str:
        chunks: list[str] = []
        if self.log_path.exists():
            with open(self.log_path, "rb") as fh:
                fh.seek(log_offset)
                chunks.append(fh.read().decode("utf-8", "replace"))
        if self.stdout_path.exists():
            chunks.append(self.stdout_path.read_bytes()[-4000:].decode("utf-8", "replace"))
        return "\n".join(chunk for chunk in chunks if chunk)

    def _reap(self, timeout: float = 10.0) -> None:
        proc = self._state.pop("proc", None)
        try:
            if isinstance(proc, subprocess.Popen):
                _terminate(proc, timeout)
        finally:
            log = self._state.pop("log", None)
            if log is not None and hasattr(log, "close"):
                log.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server and every process it started; files are kept."""
        self._reap(timeout)

    def cleanup(self) -> None:
        """Stop the server and delete its files (the log is copied into tmp_path first)."""
        self.stop()
        if self.log_path.exists() and self.tmp_path.is_dir():
            with contextlib.suppress(OSError):
                shutil.copyfile(self.log_path, self.tmp_path / "dovecot.log")
        link = self.tmp_path / "dovecot"
        if link.is_symlink() and Path(os.readlink(link)) == self.home:
            with contextlib.suppress(OSError):
                link.unlink()
        self._finalizer()

    def log_text(self) -> str:
        """Everything Dovecot has logged so far."""
        return self._tail(0)

    def processes(self) -> list[int]:
        """Pids of live processes in the (last) server's process group; empty once stopped."""
        if self._last_pgid is None:
            return []
        return group_members(self._last_pgid)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<DovecotServer {self.host}:{self.port} {state} home={self.home}>"


class _PortTakenError(RuntimeError):
    pass
