"""Property tests: parse_message never raises and always keeps its invariants."""

from __future__ import annotations

import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mailroom.mime import parse_message
from tests.mime.samples import all_samples, check_invariants

SAMPLES = all_samples()

# Byte strings that steer mutations into the interesting corners of MIME parsing.
# fmt: off
TOKENS = [
    b"\r\n", b"\n", b"\n\n", b"\r", b"--", b"--ALT", b"--MIX--", b"=?", b"?=", b"=?utf-8?b?",
    b"=?x-unknown?q?=E9", b"boundary=", b'boundary=""', b"Content-Type: multipart/mixed",
    b"Content-Type: message/rfc822\n\n", b"Content-Transfer-Encoding: base64\n",
    b"Content-Transfer-Encoding: quoted-printable\n", b"charset=", b"charset=utf-7",
    b"charset=iso-2022-jp", b"charset=x-junk", b":", b";", b"<", b">", b'"', b"(", b"\\",
    b"\x00", b"\xff", b"\xc3", b"\xe9", b"\x1b$B", b"+2AA-", b"=", b"==", b"From ",
    b"Date: ", b"Message-ID: <", b"filename*=utf-8''%", b"\t", b" ",
]
# fmt: on

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@SETTINGS
@given(raw=st.binary(max_size=3000))
def test_arbitrary_bytes_never_raise(raw: bytes) -> None:
    """Any byte string parses to a record that keeps every invariant."""
    check_invariants(parse_message(raw), raw)


@SETTINGS
@given(
    headers=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "Subject",
                    "From",
                    "To",
                    "Cc",
                    "Date",
                    "Message-ID",
                    "References",
                    "In-Reply-To",
                    "Content-Type",
                    "Content-Transfer-Encoding",
                    "Content-Disposition",
                    "Reply-To",
                    "Sender",
                    "X-Other",
                ]
            ),
            st.text(max_size=80),
        ),
        max_size=12,
    ),
    body=st.binary(max_size=500),
)
def test_header_soup_never_raises(headers: list[tuple[str, str]], body: bytes) -> None:
    """Well-known headers with arbitrary (even non-ASCII, multi-line) values never break parsing."""
    head = b"".join(
        name.encode() + b": " + value.encode("utf-8", "surrogatepass") + b"\n"
        for name, value in headers
    )
    raw = head + b"\n" + body
    parsed = parse_message(raw)
    check_invariants(parsed, raw)
    assert pickle.loads(pickle.dumps(parsed)) == parsed  # what parse workers send back


@st.composite
def mutated_sample(draw: st.DrawFn) -> bytes:
    """A sample message with a handful of random edits: flips, cuts, insertions, splices."""
    raw = bytearray(draw(st.sampled_from(SAMPLES)))
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        if not raw:
            raw.extend(draw(st.sampled_from(TOKENS)))
            continue
        pos = draw(st.integers(min_value=0, max_value=len(raw) - 1))
        kind = draw(st.sampled_from(["flip", "delete", "insert", "token", "truncate", "dup"]))
        if kind == "flip":
            raw[pos] = draw(st.integers(min_value=0, max_value=255))
        elif kind == "delete":
            del raw[pos : pos + draw(st.integers(min_value=1, max_value=40))]
        elif kind == "insert":
            raw[pos:pos] = draw(st.binary(min_size=1, max_size=20))
        elif kind == "token":
            raw[pos:pos] = draw(st.sampled_from(TOKENS))
        elif kind == "truncate":
            del raw[pos:]
        else:
            end = min(len(raw), pos + draw(st.integers(min_value=1, max_value=200)))
            raw[pos:pos] = raw[pos:end]
    return bytes(raw)


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(raw=mutated_sample())
def test_mutated_real_messages_never_raise(raw: bytes) -> None:
    """Randomly damaged versions of the sample messages parse and keep every invariant."""
    parsed = parse_message(raw)
    check_invariants(parsed, raw)
    assert pickle.loads(pickle.dumps(parsed)) == parsed


def test_truncations_of_every_sample_never_raise() -> None:
    """Every prefix of every sample message (in steps) parses and keeps every invariant."""
    for raw in SAMPLES:
        for cut in range(0, len(raw), 7):
            check_invariants(parse_message(raw[:cut]), raw[:cut])
