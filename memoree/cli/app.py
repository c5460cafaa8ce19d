"""The human command line (typer): ``memoree.cli.app:app`` is the whole ``memoree`` command.

The commands live by area (``core``, ``entities``, ``admin``, ``retrieval``, ``facts``,
``backup``, and the caller-side agent commands in ``agents``); loading each registers its
commands on the one app in ``memoree.cli.common``, in the order ``--help`` lists them. Importing
this module loads every area; the console entry (``memoree.cli.launch.run``) loads only the area
a command line needs.
"""

from __future__ import annotations

from memoree.cli.common import app, hoist_global_options
from memoree.cli.launch import load_areas

load_areas()

__all__ = ["app", "hoist_global_options"]
