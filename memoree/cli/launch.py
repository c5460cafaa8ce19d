"""How the ``memoree`` command starts: load only the area that owns the sub-command, build only it.

The commands live by area (``memoree.cli.core``, ``entities``, ...); each area registers its
commands on the one typer app when imported. ``memoree.cli.app`` loads every area (the whole
command, as ``--help`` lists it); ``run`` (the console entry) loads only the areas that register
the top-level word on the command line and builds the click command for that word alone, so
``memoree search`` neither imports the admin or agent commands nor inspects the signatures of
the other hundred. A word no area claims (``--help``, ``--version``, a typo) loads everything,
so help listings and "No such command" suggestions are those of the whole command.
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

from memoree.cli.common import GLOBAL_OPTIONS, OPTIONS, app, hoist_global_options

__all__ = ["AREAS", "AREAS_OF", "command_word", "load_areas", "run"]

# The areas in the order ``memoree --help`` lists their commands.
AREAS = ("core", "entities", "admin", "agents", "retrieval", "facts", "backup")

# Which areas register each top-level word (``()``: the root app's own command).
# tests/memoree/cli/test_launch.py checks this against what the areas register.
AREAS_OF: dict[str, tuple[str, ...]] = {
    "version": (),
    **dict.fromkeys(("call", "init", "capabilities", "schema", "instructions", "reindex", "session"), ("core",)),
    **dict.fromkeys(("demo", "link", "artifact", "claim", "relation", "conflict"), ("entities",)),
    **dict.fromkeys(("serve", "doctor", "verify", "daemon", "log", "key", "secret"), ("admin",)),
    **dict.fromkeys(("mcp", "remember", "checkpoint", "pending", "compiler", "import"), ("agents",)),
    **dict.fromkeys(("search", "recall", "probe", "retrieve", "eval", "citation"), ("retrieval",)),
    "context": ("core", "retrieval"),
    **dict.fromkeys(("band", "fact", "receipt"), ("facts",)),
    **dict.fromkeys(("purge", "backup"), ("backup",)),
}

_loaded: set[str] = set()


def load_areas(areas: tuple[str, ...] = AREAS) -> None:
    """Import each area once (in ``AREAS`` order), registering its commands on the app."""
    for area in sorted(set(areas) - _loaded, key=AREAS.index):
        module = importlib.import_module(f"memoree.cli.{area}")
        if area == "agents":  # caller-side commands register through a function, not on import
            module.register(app, OPTIONS)
        _loaded.add(area)


def command_word(argv: list[str]) -> str | None:
    """The first word of ``argv`` that is not a root option or its value: the sub-command's name."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
        index += 1 + (GLOBAL_OPTIONS.get(word) == 1)
    return None


def run(argv: list[str]) -> None:
    """Run the ``memoree`` command line ``argv`` (without the program name); exits like click."""
    word = command_word(argv)
    areas = AREAS_OF.get(word) if word is not None else None
    load_areas(AREAS if areas is None else areas)
    command = _command_for(word if areas is not None else None)
    command.main(args=hoist_global_options(argv, command), prog_name="memoree")


def _command_for(word: str | None) -> Any:
    """The click command of the whole app, or of the root with only ``word`` under it."""
    import typer.main

    if word is None:
        return typer.main.get_command(app)
    view = copy.copy(app)
    view.registered_commands = [info for info in app.registered_commands
                                if (info.name or typer.main.get_command_name(info.callback.__name__)) == word]
    view.registered_groups = [info for info in app.registered_groups if info.name == word]
    return typer.main.get_command(view)
