"""Running and auditing a store: ``serve``, ``doctor``, ``daemon ...``, ``verify``, ``log ...`` and
``key rotate``, ``secret show|rotate``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer

from memoree.errors import ConfigError, InvalidRequest, TransportError
from memoree.cli.common import (
    OPTIONS,
    answer,
    app,
    fail,
    ok,
    send,
    with_engine,
)

daemon_app = typer.Typer(help="Inspect, stop or restart the local daemon.", no_args_is_help=True)
app.add_typer(daemon_app, name="daemon")


@app.command()
def serve(
    listen: Optional[str] = typer.Option(None, "--listen", help="unix://PATH or tcp://127.0.0.1:PORT (default: the local socket)."),
    dangerously_allow_non_loopback_tcp: bool = typer.Option(False, "--dangerously-allow-non-loopback-tcp", help="Listen on a non-loopback address (TCP and HTTP still need the store's secret; traffic is not encrypted)."),
    data_dir_here: Optional[Path] = typer.Option(None, "--data-dir", help="Data directory to serve."),
    lifecycle_owner: str = typer.Option("external", "--lifecycle-owner", hidden=True),
    http: Optional[str] = typer.Option(None, "--http", help="Also serve the emem REST API on HOST:PORT (loopback unless --dangerously-allow-non-loopback-tcp; port 0 picks one, see `memoree doctor`)."),
    allow_uid: list[int] = typer.Option([], "--allow-uid", help="Also serve this uid on the Unix socket (repeatable; default: only the daemon's own user)."),
    backup_dir: Optional[Path] = typer.Option(None, "--backup-dir", envvar="MEMOREE_BACKUP_DIR", help="The folder below which backup.create over TCP may write (without it, TCP backups are refused)."),
) -> None:
    """Run the daemon in the foreground until SIGINT or SIGTERM."""
    OPTIONS.data_dir = data_dir_here or OPTIONS.data_dir
    from memoree.client.paths import data_dir
    from memoree.client.transport import ClientConfigError, Endpoint, default_endpoint
    from memoree.daemon.rest_host import parse_http_address
    from memoree.daemon.server import serve as run_daemon
    from memoree.errors import ConfigError, MemoreeError

    try:
        endpoint = Endpoint.parse(listen) if listen else default_endpoint()
        http_address = parse_http_address(http) if http else None
        run_daemon(OPTIONS.data_dir or data_dir(), endpoint, lifecycle_owner=lifecycle_owner,
                   allow_non_loopback=dangerously_allow_non_loopback_tcp, http=http_address,
                   allowed_uids=frozenset(allow_uid), backup_root=backup_dir)
    except ClientConfigError as exc:
        fail(ConfigError(str(exc)))
    except MemoreeError as exc:
        fail(exc)


@app.command()
def doctor() -> None:
    """Report the daemon's identity and health: pid, version, store, log head, projection lag."""
    send("doctor", {})


def _default_unix_endpoint_only() -> Any:
    from memoree.client.transport import default_endpoint

    if OPTIONS.endpoint:
        fail(InvalidRequest("daemon stop/restart act only on the default local Unix endpoint"))
    return default_endpoint()


@daemon_app.command("status")
def daemon_status() -> None:
    """Print the daemon's doctor report, or a stopped status (exit 1) when none answers."""
    from memoree.client.transport import Endpoint, default_endpoint

    endpoint = Endpoint.parse(OPTIONS.endpoint) if OPTIONS.endpoint else default_endpoint()
    report = _probe_or_exit(endpoint)
    if report is None:
        ok({"status": "stopped", "running": False, "endpoint": str(endpoint)})
        raise typer.Exit(1)
    ok(report)


def _probe_or_exit(endpoint: Any) -> dict[str, Any] | None:
    """The daemon's doctor report, None when none answers; a daemon that is not this user's (or
    names a pid that is not its own) is a CONFIG_ERROR envelope and exit 2."""
    from memoree.client.transport import ClientConfigError, probe

    try:
        return probe(endpoint)
    except ClientConfigError as exc:
        fail(ConfigError(str(exc)))


def _stop_default_daemon(endpoint: Any) -> dict[str, Any]:
    import signal
    import time

    from memoree.hosts import holds_flock, pid_alive

    report = _probe_or_exit(endpoint)
    if report is None:
        return {"status": "stopped", "running": False, "already_stopped": True, "stopped_pid": None, "endpoint": str(endpoint)}
    pid = report.get("daemon_pid")
    if not isinstance(pid, int) or pid <= 1:
        raise typer.Exit(1)
    # The pid came from the socket's own credentials (probe checks them); it must also hold the
    # endpoint's lock, or it is not the daemon that serves this endpoint.
    if holds_flock(pid, f"{endpoint.address}.lock") is False:
        fail(ConfigError(f"pid {pid} does not hold the endpoint's lock; refusing to signal it"))
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        current = _probe_or_exit(endpoint)
        if current is None and not pid_alive(pid):
            return {"status": "stopped", "running": False, "already_stopped": False, "stopped_pid": pid, "endpoint": str(endpoint)}
        if current is not None and current.get("daemon_pid") != pid:
            fail(TransportError("another daemon took over the endpoint"))
        time.sleep(0.05)
    fail(TransportError(f"daemon {pid} did not stop within 5 seconds"))


@daemon_app.command("stop")
def daemon_stop() -> None:
    """Stop the default local daemon (SIGTERM, then wait until it is gone)."""
    endpoint = _default_unix_endpoint_only()
    ok(_stop_default_daemon(endpoint))


@daemon_app.command("restart")
def daemon_restart() -> None:
    """Stop the default local daemon and start a fresh one."""
    from memoree.client.transport import autostart
    from memoree.client.paths import data_dir

    endpoint = _default_unix_endpoint_only()
    _stop_default_daemon(endpoint)
    ok(autostart(endpoint, OPTIONS.data_dir or data_dir()))


log_app = typer.Typer(help="Seal, prove, export and import the event log.", no_args_is_help=True)
key_app = typer.Typer(help="Manage the store's Ed25519 node key.", no_args_is_help=True)
secret_app = typer.Typer(help="Show or rotate the store's secret (what TCP and HTTP clients must send).", no_args_is_help=True)
app.add_typer(log_app, name="log")
app.add_typer(key_app, name="key")
app.add_typer(secret_app, name="secret")


def _secret_action(rotate: bool) -> None:
    from memoree.client.paths import data_dir
    from memoree.client.secret import SECRET_FILENAME, ensure_secret, rotate_secret
    from memoree.service.engine import prepare_data_dir

    def act() -> dict[str, Any]:
        folder = OPTIONS.data_dir or data_dir()
        prepare_data_dir(folder)
        token = rotate_secret(folder) if rotate else ensure_secret(folder)
        return {"secret": token, "file": str(folder / SECRET_FILENAME), "rotated": rotate}

    answer(act)


@secret_app.command("show")
def secret_show() -> None:
    """Print the store's secret (created at first use), for a TCP client or `Authorization: Bearer`."""
    _secret_action(rotate=False)


@secret_app.command("rotate")
def secret_rotate() -> None:
    """Replace the store's secret; a running daemon refuses the old one from its next request."""
    _secret_action(rotate=True)


@app.command()
def verify() -> None:
    """Check the hash chain, checkpoints, signatures, blobs and every projection (writes nothing)."""
    send("verify", {})


@log_app.command("seal")
def log_seal() -> None:
    """Close the current Merkle batch: sign a checkpoint over every event so far."""
    from memoree.eventlog import sealing

    def action(engine: Any) -> dict[str, Any]:
        checkpoint = sealing.seal(engine)
        return {"sealed": checkpoint is not None,
                "checkpoint": sealing.checkpoint_document(checkpoint) if checkpoint else None,
                "last_commit_seq": engine.head()}

    with_engine(action)


@log_app.command("checkpoints")
def log_checkpoints() -> None:
    """List the signed checkpoints."""
    from memoree.eventlog import sealing
    from memoree.eventlog.checkpoints import list_checkpoints

    with_engine(lambda engine: {"checkpoints": [sealing.checkpoint_document(cp) for cp in list_checkpoints(engine.conn)]})


@log_app.command("prove")
def log_prove(
    commit_seq: int = typer.Argument(..., help="The event's position."),
    checkpoint: Optional[int] = typer.Option(None, "--checkpoint", help="Checkpoint number (default: the first covering the event)."),
) -> None:
    """Print an RFC 9162 inclusion proof of one event against a signed checkpoint."""
    from memoree.eventlog import sealing

    with_engine(lambda engine: sealing.prove(engine, commit_seq, checkpoint))


@log_app.command("consistency")
def log_consistency(
    old: int = typer.Argument(..., help="Older checkpoint number."),
    new: int = typer.Argument(..., help="Newer checkpoint number."),
) -> None:
    """Print the RFC 9162 consistency proof between two checkpoints."""
    from memoree.eventlog import sealing

    with_engine(lambda engine: sealing.consistency(engine, old, new))


@key_app.command("rotate")
def key_rotate() -> None:
    """Start a new node-key epoch (earlier signatures stay valid under their epochs)."""
    from memoree.eventlog import sealing

    def action(engine: Any) -> dict[str, Any]:
        sealing.seal(engine)  # the old epoch signs everything up to the rotation
        key = engine.rotate_key()
        return {"epoch": key.epoch, "public_key": key.public_b32, "commit_seq": engine.head()}

    with_engine(action)


@log_app.command("export")
def log_export(
    output: Path = typer.Option(..., "--output", help="NDJSON file to write (must not exist)."),
    blobs: Optional[Path] = typer.Option(None, "--blobs", help="Also copy every referenced blob into this folder."),
) -> None:
    """Write the auditor export: every raw event, the signed checkpoints and no-op records."""
    from memoree.admin import transfer

    with_engine(lambda engine: transfer.export(engine, output.expanduser().absolute(), blobs.expanduser().absolute() if blobs else None))


@log_app.command("import")
def log_import(
    export_file: Path = typer.Argument(..., help="An export written by `memoree log export`."),
    target: Path = typer.Option(..., "--data-dir", help="New, empty data dir to rebuild the store in."),
    blobs: Optional[Path] = typer.Option(None, "--blobs", help="Folder of blobs written by `log export --blobs`."),
) -> None:
    """Rebuild a store from an export by replay (positions preserved), verified before publishing."""
    from memoree.admin import transfer
    from memoree.cli.progress import busy

    def rebuild() -> dict[str, Any]:
        with busy("import …"):
            return transfer.import_log(export_file, target.expanduser().absolute(), blobs)

    answer(rebuild)


@log_app.command("migrate")
def log_migrate(
    to: str = typer.Option(..., "--to", help="postgresql://USER@HOST:PORT/DB of the shared log (empty, or holding a prefix of this log)."),
) -> None:
    """Move this data dir's SQLite log into PostgreSQL by replay (positions, bytes, checkpoints, blobs kept)."""
    from memoree.client.paths import data_dir

    def move() -> dict[str, Any]:
        from memoree.eventlog import migrate  # needs the memoree[postgres] extra: a typed error without it

        return migrate.migrate((OPTIONS.data_dir or data_dir()).expanduser().absolute(), to)

    answer(move)
