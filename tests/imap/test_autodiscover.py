"""Autodiscovery against real servers on loopback: an https autoconfig file, a DNS server."""

from __future__ import annotations

import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import dns.message
import dns.rdataclass
import dns.rdatatype
import dns.resolver
import dns.rrset
import pytest

from mailroom.errors import ConfigError
from mailroom.providers.imap.autodiscover import MAX_BYTES, Discoverer, Server, split_address
from tests.jmap.conftest import self_signed

AUTOCONFIG = b"""<?xml version="1.0"?>
<clientConfig version="1.1">
  <emailProvider id="localhost">
    <incomingServer type="pop3"><hostname>pop.example.org</hostname><port>995</port>
      <socketType>SSL</socketType></incomingServer>
    <incomingServer type="imap"><hostname>IMAP.Example.org</hostname><port>143</port>
      <socketType>STARTTLS</socketType><username>%EMAILLOCALPART%</username></incomingServer>
    <outgoingServer type="smtp"><hostname>smtp.example.org</hostname><port>465</port>
      <socketType>SSL</socketType></outgoingServer>
  </emailProvider>
</clientConfig>"""


class _Files(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        self.seen.append(f"{self.headers['Host']}{self.path}")
        body = self.files.get(self.path.split("?")[0])
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def https(tmp_path: Path) -> Iterator[tuple[int, ssl.SSLContext, type[_Files]]]:
    """An https server on 127.0.0.1 (self-signed for localhost) and a context trusting it."""
    cert, key = self_signed(tmp_path)
    handler = type("Files", (_Files,), {"files": {}, "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    server.socket = served.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    trusting = ssl.create_default_context(cafile=str(cert))
    try:
        yield server.server_address[1], trusting, handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def dns_server() -> Iterator[tuple[dns.resolver.Resolver, dict[str, list[str]]]]:
    """A tiny UDP DNS server on loopback answering SRV questions from a dict, and a
    resolver pointed at it. ``records[name]`` holds ``"priority weight port target"``."""
    records: dict[str, list[str]] = {}
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    stop = threading.Event()

    def answer() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                wire, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            query = dns.message.from_wire(wire)
            response = dns.message.make_response(query)
            question = query.question[0]
            name = question.name.to_text(omit_final_dot=True)
            if question.rdtype == dns.rdatatype.SRV and name in records:
                response.answer.append(
                    dns.rrset.from_text_list(question.name, 60, "IN", "SRV", records[name])
                )
            else:
                response.set_rcode(3)  # NXDOMAIN
            sock.sendto(response.to_wire(), peer)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = ["127.0.0.1"]
    resolver.port = sock.getsockname()[1]
    try:
        yield resolver, records
    finally:
        stop.set()
        thread.join()
        sock.close()


def test_the_autoconfig_file_on_the_domain_names_the_servers(
    https: tuple[int, ssl.SSLContext, type[_Files]],
) -> None:
    port, trusting, files = https
    files.files["/.well-known/autoconfig/mail/config-v1.1.xml"] = AUTOCONFIG
    found = Discoverer(["localhost"], ssl_context=trusting, https_port=port).discover(
        "Ann@LocalHost"
    )
    assert found.source == "autoconfig"
    assert found.imap == Server("imap.example.org", 143, "starttls")
    assert found.smtp == Server("smtp.example.org", 465, "tls")
    assert found.login == "Ann"
    # autoconfig.localhost does not resolve, so the domain's own well-known file was asked
    assert files.seen == [
        f"localhost:{port}/.well-known/autoconfig/mail/config-v1.1.xml?emailaddress=Ann%40localhost"
    ]


def test_the_guard_keeps_discovery_off_private_hosts(
    https: tuple[int, ssl.SSLContext, type[_Files]],
) -> None:
    port, trusting, files = https
    files.files["/.well-known/autoconfig/mail/config-v1.1.xml"] = AUTOCONFIG
    found = Discoverer([], ssl_context=trusting, https_port=port).discover("ann@localhost")
    assert files.seen == []  # localhost is loopback and not allow-listed
    assert found.source == "guess"
    assert found.imap == Server("imap.localhost", 993, "ssl")
    assert not found.found


@pytest.mark.parametrize(
    "body",
    [
        AUTOCONFIG.replace(b"<?xml", b"<!DOCTYPE x [<!ENTITY a 'b'>]><?xml", 1),
        b"<clientConfig><emailProvider></emailProvider></clientConfig>",
        b"not xml at all",
        AUTOCONFIG + b" " * MAX_BYTES,
    ],
    ids=["doctype", "no-imap", "not-xml", "too-big"],
)
def test_an_unusable_autoconfig_file_is_passed_over(
    https: tuple[int, ssl.SSLContext, type[_Files]], body: bytes
) -> None:
    port, trusting, files = https
    files.files["/.well-known/autoconfig/mail/config-v1.1.xml"] = body
    found = Discoverer(["localhost"], ssl_context=trusting, https_port=port).discover(
        "ann@localhost"
    )
    assert len(files.seen) == 1
    assert found.source == "guess"


def test_an_untrusted_certificate_is_not_read(
    https: tuple[int, ssl.SSLContext, type[_Files]],
) -> None:
    port, _, files = https
    files.files["/.well-known/autoconfig/mail/config-v1.1.xml"] = AUTOCONFIG
    found = Discoverer(["localhost"], https_port=port).discover("ann@localhost")
    assert found.source == "guess"


def test_srv_records_name_the_servers_by_priority(
    dns_server: tuple[dns.resolver.Resolver, dict[str, list[str]]],
) -> None:
    resolver, records = dns_server
    records["_imaps._tcp.mail.test"] = ["20 0 993 backup.mail.test.", "10 0 993 imap.mail.test."]
    records["_submission._tcp.mail.test"] = ["0 1 587 smtp.mail.test."]
    found = Discoverer(https_port=1, resolver=resolver, timeout=1).discover("bo@mail.test")
    assert found.source == "srv"
    assert found.imap == Server("imap.mail.test", 993, "ssl")
    assert found.smtp == Server("smtp.mail.test", 587, "starttls")
    assert found.login == "bo@mail.test"


def test_a_dot_target_says_the_service_is_not_offered(
    dns_server: tuple[dns.resolver.Resolver, dict[str, list[str]]],
) -> None:
    resolver, records = dns_server
    records["_imaps._tcp.mail.test"] = ["0 0 0 ."]
    records["_imap._tcp.mail.test"] = ["0 0 143 imap.mail.test."]
    found = Discoverer(https_port=1, resolver=resolver, timeout=1).discover("bo@mail.test")
    assert found.imap == Server("imap.mail.test", 143, "starttls")
    assert found.smtp is None


def test_common_names_count_when_the_guard_accepts_them(
    dns_server: tuple[dns.resolver.Resolver, dict[str, list[str]]],
) -> None:
    resolver, _ = dns_server
    # "localhost" is the one name that resolves here; "mail.localhost" and friends do not.
    found = Discoverer(["localhost"], https_port=1, resolver=resolver, timeout=1)._first_public(
        ["imap.localhost", "localhost"], 993
    )
    assert found == "localhost"
    assert Discoverer([], resolver=resolver)._first_public(["localhost"], 993) is None


@pytest.mark.parametrize("address", ["", "ann", "@example.org", "ann@", "ann@exa mple.org"])
def test_a_bad_address_is_one_sentence(address: str) -> None:
    with pytest.raises(ConfigError, match="is not an email address"):
        split_address(address)
