"""The ``memoree`` console entry point: ``call`` takes a lean path, everything else loads the CLI.

``memoree call`` runs once per agent action, so it must not pay for typer, rich or pydantic.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["call"]:
        from memoree.client.call import main as call_main

        sys.exit(call_main(argv[1:]))
    from memoree.cli.app import app

    app()


if __name__ == "__main__":
    main()
