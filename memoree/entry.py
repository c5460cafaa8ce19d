"""The ``memoree`` console entry point: ``call`` takes a lean path, everything else loads the CLI.

``memoree call`` runs once per agent action, so it must not pay for typer, rich or pydantic; the
other commands load only the area of the command line they run (``memoree.cli.launch``).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["call"]:
        from memoree.client.call import main as call_main

        sys.exit(call_main(argv[1:]))
    from memoree.cli.launch import run

    run(argv or ["--help"])  # the bare command is a request for help, not a usage error


if __name__ == "__main__":
    main()
