"""``python -m mailroom`` runs the CLI."""

from mailroom.cli.main import main

main()
