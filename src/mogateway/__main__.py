"""``python -m mogateway`` runs the CLI."""

from mogateway.cli import main

main()
