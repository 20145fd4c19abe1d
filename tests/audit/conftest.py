"""The web fixtures (the whole application under uvicorn, its authenticator and clock)."""

from tests.web.conftest import auth, clock, server

__all__ = ["auth", "clock", "server"]
