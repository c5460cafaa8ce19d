"""Backups and erasure: ``backup create``, ``backup restore`` and ``purge``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from memoree.cli.common import (
    IdemOption,
    answer,
    app,
    send,
)

backup_app = typer.Typer(help="Create and restore verified backups.", no_args_is_help=True)
app.add_typer(backup_app, name="backup")


@backup_app.command("create")
def backup_create(destination: Path = typer.Argument(..., help="New folder for the backup (must not exist).")) -> None:
    """Seal, snapshot, verify by replay and atomically publish a backup at DESTINATION."""
    send("backup.create", {"destination": str(destination.expanduser().absolute())})


@backup_app.command("restore")
def backup_restore(
    source: Path = typer.Argument(..., help="A backup folder made by `memoree backup create`."),
    target: Path = typer.Option(..., "--data-dir", help="New, empty data dir to restore into."),
) -> None:
    """Restore a backup into a new data dir; it is verified before it appears there."""
    from memoree.admin import backup
    from memoree.cli.progress import busy

    def restore() -> dict[str, Any]:
        with busy("restore …"):
            return backup.restore(source.expanduser().absolute(), target.expanduser().absolute())

    answer(restore)


@app.command()
def purge(
    artifact_id: str = typer.Argument(..., help="The artifact whose bytes to erase."),
    reason: str = typer.Option(..., "--reason", help="Why (required, kept in the log)."),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Erase an artifact's bytes from the CAS and the search index (the log keeps its digests)."""
    send("artifact.purge", {"artifact_id": artifact_id, "reason": reason}, idempotency_key=idempotency_key)
