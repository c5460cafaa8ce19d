"""The human command line (typer): ``memoree.cli.app:app`` is the whole ``memoree`` command.

The commands live by area (``core``, ``entities``, ``admin``, ``retrieval``, ``facts``,
``backup``, and the caller-side agent commands in ``agents``); importing each registers its
commands on the one app in ``memoree.cli.common``, so the imports below run in the order
``--help`` lists the commands.
"""

from __future__ import annotations

from memoree.cli.common import OPTIONS, app, hoist_global_options

from memoree.cli import core  # noqa: E402,F401,I001 - each import registers its commands, in order
from memoree.cli import entities  # noqa: E402,F401
from memoree.cli import admin  # noqa: E402,F401
from memoree.cli.agents import register as register_agent_commands  # noqa: E402

register_agent_commands(app, OPTIONS)

from memoree.cli import retrieval  # noqa: E402,F401
from memoree.cli import facts  # noqa: E402,F401
from memoree.cli import backup  # noqa: E402,F401

__all__ = ["app", "hoist_global_options"]
