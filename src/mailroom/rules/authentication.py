"""Did the sender's authentication pass? Read from the receiving provider's Authentication-Results.

A rule may file mail into a tab only when the sender is who the From says
(otherwise anyone could put mail into "Primary" by forging a friend's
address). We believe exactly one verdict: the ``Authentication-Results``
header (RFC 8601) the receiving provider added, which is the topmost one,
because every hop adds its headers above the ones it received. A header
lower down may have been written by the sender and is never read.

Whose verdict is trusted:

- ``account.settings["authserv_ids"]`` (a list), when the operator set it:
  the topmost header must carry one of these authserv-ids.
- Otherwise, for ``gmail`` accounts the authserv-id must be
  ``mx.google.com``; for ``graph`` accounts Microsoft writes the header
  without an authserv-id; for IMAP and local accounts the topmost header is
  taken as the provider's.

The verdict passes when it says ``dmarc=pass``, or ``dkim=pass`` for a
domain aligned with the From domain (equal, or one a subdomain of the
other), or ``spf=pass`` for an aligned ``smtp.mailfrom`` domain. Anything
else — no header, ``fail``, ``none``, ``temperror``, unaligned — does not.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

_COMMENT = re.compile(r"\([^()]*\)")
_RESULT = re.compile(r"^\s*([a-z0-9-]+)\s*=\s*([a-z]+)", re.IGNORECASE)
_PROPERTY = re.compile(r"([a-z]+\.[a-z0-9_-]+)\s*=\s*(\"[^\"]*\"|[^\s;]+)", re.IGNORECASE)

PROVIDER_AUTHSERV_IDS: dict[str, frozenset[str]] = {"gmail": frozenset({"mx.google.com"})}


@dataclass(frozen=True, slots=True)
class AuthVerdict:
    """Whether the sender's authentication passed, and the sentence saying why."""

    passed: bool
    reason: str


def _domain(value: str) -> str:
    value = value.strip().strip('"').strip("<>").lower()
    return value.rpartition("@")[2].strip(".")


def _aligned(a: str, b: str) -> bool:
    return bool(a and b) and (a == b or a.endswith("." + b) or b.endswith("." + a))


def parse_results(value: str) -> tuple[str | None, list[tuple[str, str, dict[str, str]]]]:
    """Split an Authentication-Results value into (authserv-id, [(method, result, props)])."""
    text = value
    while _COMMENT.search(text):
        text = _COMMENT.sub(" ", text)
    parts = [part.strip() for part in text.split(";")]
    authserv: str | None = None
    if parts and "=" not in parts[0]:
        authserv = parts[0].split()[0].lower() if parts[0].split() else None
        parts = parts[1:]
    results = []
    for part in parts:
        match = _RESULT.match(part)
        if not match:
            continue
        props = {k.lower(): v.strip('"') for k, v in _PROPERTY.findall(part[match.end() :])}
        results.append((match.group(1).lower(), match.group(2).lower(), props))
    return authserv, results


def sender_authenticated(
    headers: Sequence[tuple[str, str]] | Sequence[Sequence[str]],
    from_email: str,
    provider: str = "local",
    trusted_ids: Collection[str] | None = None,
) -> AuthVerdict:
    """Judge the topmost Authentication-Results header for the From address (see module doc)."""
    topmost = next(
        (str(pair[1]) for pair in headers if str(pair[0]).lower() == "authentication-results"),
        None,
    )
    if topmost is None:
        return AuthVerdict(False, "no Authentication-Results header from the receiving provider")
    authserv, results = parse_results(topmost)
    trusted = (
        {t.lower() for t in trusted_ids} if trusted_ids else PROVIDER_AUTHSERV_IDS.get(provider)
    )
    if trusted is not None and (authserv or "") not in trusted:
        return AuthVerdict(False, f"the topmost Authentication-Results is from {authserv!r}")
    from_domain = _domain(from_email)
    for method, result, props in results:
        if result != "pass":
            continue
        if method == "dmarc":
            return AuthVerdict(True, "dmarc=pass")
        if method == "dkim":
            signer = props.get("header.d") or _domain(props.get("header.i", ""))
            if _aligned(_domain(signer), from_domain):
                return AuthVerdict(True, f"dkim=pass for {signer}")
        if method == "spf":
            envelope = props.get("smtp.mailfrom") or props.get("smtp.helo", "")
            if _aligned(_domain(envelope), from_domain):
                return AuthVerdict(True, f"spf=pass for {_domain(envelope)}")
    return AuthVerdict(False, "no aligned pass in the receiving provider's Authentication-Results")
