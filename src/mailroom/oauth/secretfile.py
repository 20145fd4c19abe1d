"""Reading an OAuth client secret from a file, never from the command line.

The file is either the JSON Google's console downloads (``{"installed": {...}}``
or ``{"web": {...}}`` with ``client_id`` and ``client_secret``) or plain text whose
first line is the secret (what Microsoft's portal shows once). A JSON file
naming another client id than ``--client-id`` is refused: the pair would only be
refused later by the token endpoint, with a vaguer answer.
"""

from __future__ import annotations

import json
from pathlib import Path

from mailroom.errors import ConfigError

__all__ = ["read_client_secret"]


def _from_json(data: object, client_id: str, path: Path) -> str | None:
    if not isinstance(data, dict):
        return None
    section = data.get("installed") or data.get("web")
    if not isinstance(section, dict):
        return None
    named = section.get("client_id")
    if isinstance(named, str) and named and named != client_id:
        raise ConfigError(
            f"The client secret file {path} belongs to the client {named!r}, not to "
            f"--client-id {client_id!r}; give the matching pair."
        )
    secret = section.get("client_secret")
    return secret if isinstance(secret, str) else ""


def read_client_secret(path: Path, client_id: str) -> str:
    """The client secret in ``path``; ConfigError in one sentence when it cannot be had."""
    path = path.expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"The client secret file {path} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ConfigError(f"The client secret file {path} is not readable ({reason}).") from None
    secret: str | None = None
    if text.lstrip().startswith("{"):
        try:
            secret = _from_json(json.loads(text), client_id, path)
        except json.JSONDecodeError:
            raise ConfigError(
                f"The client secret file {path} is neither the JSON file from the provider's "
                "console nor one line of text."
            ) from None
        if secret is None:
            raise ConfigError(
                f'The client secret file {path} has no "installed" or "web" client in it.'
            )
    else:
        lines = text.splitlines()
        secret = lines[0].strip() if lines else ""
    if not secret:
        raise ConfigError(f"The client secret file {path} holds no client secret.")
    return secret
