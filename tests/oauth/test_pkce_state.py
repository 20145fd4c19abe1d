"""PKCE S256 and the signed state: the RFC's example, tampering, binding and expiry refused."""

from __future__ import annotations

import pytest

from mailroom.oauth.pkce import challenge_for, new_pkce
from mailroom.oauth.state import StateError, StateSigner
from mailroom.providers.base import AuthError

KEY = bytes(range(32))


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_challenge_matches_the_rfc_7636_example() -> None:
    """The S256 challenge of RFC 7636 Appendix B's verifier is the one printed there."""
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert challenge_for(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_new_verifiers_are_long_unreserved_and_fresh() -> None:
    """A verifier has 43-128 unreserved characters, its own challenge, and never repeats."""
    first, second = new_pkce(), new_pkce()
    assert 43 <= len(first.verifier) <= 128
    assert set(first.verifier) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
    )
    assert first.challenge == challenge_for(first.verifier)
    assert first.verifier != second.verifier
    assert first.verifier not in repr(first)


def test_a_state_verifies_only_for_its_own_flow_and_key() -> None:
    """The issuing signer accepts its state for the same binding; other bindings/keys refuse."""
    signer = StateSigner.from_master_key(KEY)
    state = signer.issue("gmail\nclient\nhttp://127.0.0.1:5000/callback")
    signer.verify(state, "gmail\nclient\nhttp://127.0.0.1:5000/callback")
    with pytest.raises(StateError):
        signer.verify(state, "gmail\nclient\nhttp://127.0.0.1:5001/callback")
    with pytest.raises(StateError):
        StateSigner.from_master_key(bytes(32)).verify(
            state, "gmail\nclient\nhttp://127.0.0.1:5000/callback"
        )
    assert signer.issue("x") != signer.issue("x")  # a fresh nonce each time


@pytest.mark.parametrize("position", [0, 11, -1])
def test_a_changed_character_is_refused(position: int) -> None:
    """Changing any part of the state (expiry, nonce or MAC) makes it fail, as an AuthError."""
    signer = StateSigner.from_master_key(KEY)
    state = signer.issue("flow")
    changed = "1" if state[position] != "1" else "2"
    tampered = state[:position] + changed + (state[position + 1 :] if position != -1 else "")
    with pytest.raises(AuthError, match="does not belong to this connection"):
        signer.verify(tampered, "flow")
    for garbage in ("", "..", "nodots", "é.é.é"):
        with pytest.raises(StateError):
            signer.verify(garbage, "flow")


def test_an_expired_state_is_refused() -> None:
    """A state is good until its time-to-live has passed, then refused."""
    clock = Clock()
    signer = StateSigner.from_master_key(KEY, clock=clock)
    state = signer.issue("flow", ttl=60)
    clock.now += 59
    signer.verify(state, "flow")
    clock.now += 2
    with pytest.raises(StateError):
        signer.verify(state, "flow")
