"""``python -m mogateway.cli`` runs the CLI (as ``python -m mogateway`` does)."""

from mogateway.cli import main

main()
