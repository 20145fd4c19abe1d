"""PKCE (RFC 7636) with the S256 method: a secret verifier and the challenge sent ahead.

The verifier never leaves mailroom until the code exchange; the authorization
request carries only ``BASE64URL(SHA256(verifier))``, so a code intercepted on
its way through the browser is useless without the verifier. The verifier is 86
characters of the unreserved set (RFC 7636 §4.1 asks for 43 to 128), from the
operating system's random source.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field

__all__ = ["METHOD", "Pkce", "challenge_for", "new_pkce"]

METHOD = "S256"


def challenge_for(verifier: str) -> str:
    """The S256 challenge of ``verifier``: base64url of its SHA-256, without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class Pkce:
    """One flow's verifier (kept secret) and its challenge (sent with the authorization)."""

    verifier: str = field(repr=False)
    challenge: str
    method: str = METHOD


def new_pkce() -> Pkce:
    """A fresh verifier and its challenge, for one authorization."""
    verifier = secrets.token_urlsafe(64)
    return Pkce(verifier=verifier, challenge=challenge_for(verifier))
