"""FieldCipher and data keys on both stores: round trip, swaps, owners, tampering, lookup hashes."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from mailroom.crypto import FieldCipher, FieldTampered, KeyGone, MasterKeyWrapper, OwnerKeys
from mailroom.crypto.fields import (
    COMPRESS_FROM,
    COMPRESSED_PREFIX,
    PREFIX,
    from_text,
    to_text,
    version_of,
)
from mailroom.store.engine import Store
from mailroom.store.models import OwnerKey
from tests.crypto.conftest import add_owner

FIXTURES = [HealthCheck.function_scoped_fixture]


@settings(max_examples=15, deadline=None, suppress_health_check=FIXTURES)
@given(value=st.text(max_size=200), row=st.integers(1, 2**40))
def test_a_value_round_trips_and_opens_only_in_its_own_place(
    store: Store, wrapper: MasterKeyWrapper, value: str, row: int
) -> None:
    """Decrypting at another row, column, table or owner is refused; its own place opens it."""
    alice, bob = add_owner(store, "alice"), add_owner(store, "bob")
    with store.session() as session:
        keys = OwnerKeys(session, wrapper)
        keys.current(bob)  # bob has a key of the same version: the tag, not a missing key, refuses
        cipher = FieldCipher(keys)
        sealed = cipher.encrypt(alice, "messages", "subject", row, value)
        assert cipher.decrypt_text(alice, "messages", "subject", row, sealed) == value
        if len(value.encode()) >= 8:  # a shorter one may occur in random bytes by chance
            assert value.encode() not in sealed
        for owner, table, column, row_id in [
            (alice, "messages", "subject", row + 1),
            (alice, "messages", "preview", row),
            (alice, "threads", "subject", row),
            (bob, "messages", "subject", row),
        ]:
            with pytest.raises(FieldTampered):
                cipher.decrypt(owner, table, column, row_id, sealed)


def test_a_changed_byte_is_refused_and_nonces_differ(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """Any flipped byte fails the tag; the same value sealed twice gives two ciphertexts."""
    alice = add_owner(store, "alice")
    with store.session() as session:
        cipher = FieldCipher(OwnerKeys(session, wrapper))
        sealed = cipher.encrypt(alice, "messages", "subject", 1, "Quarterly numbers")
        assert sealed != cipher.encrypt(alice, "messages", "subject", 1, "Quarterly numbers")
        for index in (8, len(sealed) // 2, len(sealed) - 1):
            bad = bytearray(sealed)
            bad[index] ^= 1
            with pytest.raises(FieldTampered):
                cipher.decrypt(alice, "messages", "subject", 1, bytes(bad))
        with pytest.raises(FieldTampered, match="damaged"):
            cipher.decrypt(alice, "messages", "subject", 1, b"f1")
        assert from_text(to_text(sealed)) == sealed
        with pytest.raises(FieldTampered):
            from_text("plain subject")


def test_a_large_value_is_compressed_before_it_is_sealed(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """A long, compressible value is sealed compressed (smaller, its own prefix, bound to
    being compressed); a short or incompressible one as it is; each opens to what it was."""
    alice = add_owner(store, "alice")
    body = "Dear Ann, the hangar forecast for next week follows.\n" * 40
    noise = os.urandom(4096)
    with store.session() as session:
        cipher = FieldCipher(OwnerKeys(session, wrapper))
        compressed = cipher.encrypt(alice, "message_bodies", "text_body", 7, body)
        assert compressed.startswith(COMPRESSED_PREFIX) and len(compressed) < len(body) // 4
        assert cipher.decrypt_text(alice, "message_bodies", "text_body", 7, compressed) == body
        short = cipher.encrypt(alice, "message_bodies", "text_body", 7, body[: COMPRESS_FROM - 1])
        random = cipher.encrypt(alice, "blobs", "data", "k", noise)
        assert short.startswith(PREFIX) and random.startswith(PREFIX)
        assert cipher.decrypt(alice, "blobs", "data", "k", random) == noise
        # The prefix is bound by the tag: claiming a compressed value is not (or the
        # reverse) does not open.
        for token, other in ((compressed, PREFIX), (short, COMPRESSED_PREFIX)):
            with pytest.raises(FieldTampered):
                cipher.decrypt(alice, "message_bodies", "text_body", 7, other + token[2:])


def test_data_keys_are_stored_wrapped_one_per_owner_and_reused(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """The first use makes version 1, stored wrapped; a later session unwraps the same key."""
    alice = add_owner(store, "alice")
    with store.session() as session:
        first = OwnerKeys(session, wrapper).current(alice)
    with store.session() as session:
        again = OwnerKeys(session, wrapper).current(alice)
        (row,) = session.scalars(select(OwnerKey)).all()
    assert (first.version, first.key) == (again.version, again.key) == (1, again.key)
    assert first.key not in row.wrapped and row.wrapped_by == wrapper.key_id


def test_values_of_both_versions_open_and_a_deleted_key_reads_nothing(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """After add_version new values carry version 2, old ones still open; without keys none do."""
    alice = add_owner(store, "alice")
    with store.session() as session:
        keys = OwnerKeys(session, wrapper)
        cipher = FieldCipher(keys)
        old = cipher.encrypt(alice, "contacts", "name", 5, "Old")
        keys.add_version(alice)
        new = cipher.encrypt(alice, "contacts", "name", 5, "New")
        assert (version_of(old), version_of(new)) == (1, 2)
    with store.session() as session:
        cipher = FieldCipher(OwnerKeys(session, wrapper))
        assert cipher.decrypt_text(alice, "contacts", "name", 5, old) == "Old"
        assert cipher.decrypt_text(alice, "contacts", "name", 5, new) == "New"
        session.query(OwnerKey).delete()
    with store.session() as session, pytest.raises(KeyGone, match="cannot be read"):
        FieldCipher(OwnerKeys(session, wrapper)).decrypt(alice, "contacts", "name", 5, new)


def test_lookup_hashes_match_per_owner_and_kind_and_cover_every_version(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """Equal values hash equal per owner and kind; owners and kinds differ; rotation adds one."""
    alice, bob = add_owner(store, "alice"), add_owner(store, "bob")
    with store.session() as session:
        keys = OwnerKeys(session, wrapper)
        cipher = FieldCipher(keys)
        mid = "abc@example.org"
        first = cipher.lookup_hash(alice, "message-id", mid)
        assert first == cipher.lookup_hash(alice, "message-id", mid) and len(first) == 64
        assert first != cipher.lookup_hash(bob, "message-id", mid)
        assert first != cipher.lookup_hash(alice, "address", mid)
        assert mid not in first
        keys.add_version(alice)
        second = cipher.lookup_hash(alice, "message-id", mid)
        assert cipher.lookup_hashes(alice, "message-id", mid) == [second, first]


def test_lookup_hasher_gives_the_raw_bytes_of_lookup_hash(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """The batch hasher (blind index ingest) and the single hash (queries) must agree."""
    alice = add_owner(store, "alice")
    with store.session() as session:
        cipher = FieldCipher(OwnerKeys(session, wrapper))
        hasher = cipher.lookup_hasher(alice, "token")
        for word in ("walrus", "", "näive", "x" * 200):
            assert hasher(word) == bytes.fromhex(cipher.lookup_hash(alice, "token", word))
        assert hasher("walrus") != cipher.lookup_hasher(alice, "token.body")("walrus")


def test_a_sealer_seals_as_encrypt_with_fresh_nonces(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """A batch's sealer: values open as :meth:`encrypt`'s (same form and associated data),
    each under its own nonce, also across blocks of pooled nonces and threads."""
    import threading

    from mailroom.crypto.fields import PREFIX

    alice = add_owner(store, "alice")
    with store.session() as session:
        cipher = FieldCipher(OwnerKeys(session, wrapper))
        seal = cipher.sealer(alice)
        sealed = [seal("messages", "subject", row, f"value {row}") for row in range(1500)]
        for row, token in enumerate(sealed):
            assert token.startswith(PREFIX) and version_of(token) == 1
            assert cipher.decrypt_text(alice, "messages", "subject", row, token) == f"value {row}"
        with pytest.raises(FieldTampered):
            cipher.decrypt(alice, "messages", "preview", 0, sealed[0])
        found: list[bytes] = []

        def more() -> None:
            found.extend(seal("messages", "subject", 1, b"x") for _ in range(700))

        threads = [threading.Thread(target=more) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        nonces = [token[6:18] for token in [*sealed, *found]]
        assert len(set(nonces)) == len(nonces) == 3600


def test_a_forked_child_never_reuses_its_parent_nonces() -> None:
    """Nonces are sliced from a pooled random block: a forked child must draw its own."""
    import os

    from mailroom.crypto import fields

    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    fields._nonces.next()  # the parent holds a partly used block
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.write(write, b"".join(fields._nonces.next() for _ in range(20)))
        os._exit(0)
    os.close(write)
    theirs = b""
    while chunk := os.read(read, 4096):
        theirs += chunk
    os.waitpid(child, 0)
    ours = b"".join(fields._nonces.next() for _ in range(20))
    assert len(theirs) == 240 and theirs != ours
    assert not {theirs[i : i + 12] for i in range(0, 240, 12)} & {
        ours[i : i + 12] for i in range(0, 240, 12)
    }


def test_lookup_hash_is_hmac_sha256_under_the_derived_key(
    store: Store, wrapper: MasterKeyWrapper
) -> None:
    """Stored lookup hashes must stay what they were: HMAC-SHA256 under the HKDF lookup key."""
    import hashlib
    import hmac

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    alice = add_owner(store, "alice")
    with store.session() as session:
        keys = OwnerKeys(session, wrapper)
        cipher = FieldCipher(keys)
        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"mailroom lookup v1:message-id"
        ).derive(keys.current(alice).key)
        assert cipher.lookup_key(keys.current(alice), "message-id") == derived
        for value in ("abc@example.org", "", "näive" * 40):
            expected = hmac.new(derived, value.encode(), hashlib.sha256).hexdigest()
            assert cipher.lookup_hash(alice, "message-id", value) == expected
