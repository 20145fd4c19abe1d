"""The registry: dispatch by provider name only, and each provider's `account add` command."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from mailroom.cli.accounts import account_group
from mailroom.providers import registry
from mailroom.providers.local import LocalImporter, LocalPropagator
from mailroom.store.engine import Store


@pytest.fixture
def extra_provider() -> Iterator[None]:
    """A provider "extra" with only an add command, registered for one test."""

    @click.command("extra")
    def add_extra() -> None:
        """Add an extra account."""
        click.echo("extra added")

    registry.register(registry.ProviderEntry("extra", add_command=lambda: add_extra))
    yield
    registry.unregister("extra")


def test_services_are_found_by_the_provider_name_alone(store: Store) -> None:
    """The local provider is registered by name; unknown names and missing parts give None."""
    assert isinstance(registry.importer_for(store, "local"), LocalImporter)
    assert isinstance(registry.propagator_for(store, "local"), LocalPropagator)
    assert registry.syncer_for(store, "local") is None
    assert registry.watcher_for(store, "local", 1) is None
    assert registry.syncer_for(store, "nosuch") is None
    assert {"imap", "local"} <= set(registry.names())


def test_account_add_offers_each_registered_providers_command(extra_provider: None) -> None:
    """`account add` lists the registry's commands, so a new provider needs no CLI edit."""
    runner = CliRunner()
    listing = runner.invoke(account_group, ["add", "--help"])
    assert listing.exit_code == 0 and "imap" in listing.output and "extra" in listing.output
    assert "local" in listing.output.split("Commands:")[1]  # account add local (outgoing mail)
    added = runner.invoke(account_group, ["add", "extra"])
    assert added.exit_code == 0 and "extra added" in added.output
