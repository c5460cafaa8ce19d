"""``python -m memoree`` runs the same entry point as the ``memoree`` command."""

from memoree.entry import main

main()
