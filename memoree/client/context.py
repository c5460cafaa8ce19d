"""Client-side ambient context resolution (spec §2.8): standard library only.

Order: an explicit ``context`` in the request > ``MEMOREE_CONTEXT`` (JSON) > the nearest
``.memoree.toml`` marker walking up from the working directory > the ``[personal]`` section of
the config file > none (the service then answers NO_AMBIENT_CONTEXT for ops that need one). A
malformed nearest marker or variable is an error, never skipped. The service never resolves
context: its working directory is not the caller's.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: this module is on ``memoree call``'s import path
    from pathlib import Path
    from typing import Any

__all__ = [
    "CONTEXT_FREE_OPS",
    "MARKER_NAME",
    "ContextResolutionError",
    "find_marker",
    "nearest_marker",
    "read_marker",
    "resolve",
    "task_id_for",
]

MARKER_NAME = ".memoree.toml"
# Ops known to need no ambient context, so the fast client skips resolving one for them (it need
# not import the registry). An op missing here merely gets a context attached, which the service
# does not echo; a test keeps every op listed here context-free in the registry.
CONTEXT_FREE_OPS = frozenset({
    "capabilities", "instructions", "schema", "artifact.get", "artifact.history", "claim.get",
    "claim.history", "doctor", "verify", "backup.create", "citation.get", "fact.identity",
    "band.list", "batch",
})
_CONTEXT_KEYS = {"workspace_id", "project_id", "task_id", "component", "pins"}


class ContextResolutionError(Exception):
    """A marker, variable or config section that exists but is malformed (CONFIG_ERROR)."""


def _validated(document: Any, origin: str) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise ContextResolutionError(f"{origin} must be an object with workspace_id and project_id")
    unknown = set(document) - _CONTEXT_KEYS
    if unknown:
        raise ContextResolutionError(f"{origin} has unknown field(s): {', '.join(sorted(unknown))}")
    context: dict[str, Any] = {}
    for key in ("workspace_id", "project_id"):
        value = document.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ContextResolutionError(f"{origin} needs a non-empty string {key}")
        context[key] = value
    for key in ("task_id", "component"):
        value = document.get(key)
        if value is not None:
            if not isinstance(value, str) or not value.strip():
                raise ContextResolutionError(f"{origin} field {key} must be a non-empty string")
            context[key] = value
    pins = document.get("pins", [])
    if not isinstance(pins, list) or not all(isinstance(p, str) and p for p in pins):
        raise ContextResolutionError(f"{origin} field pins must be a list of strings")
    context["pins"] = pins
    return context


def nearest_marker(start: str) -> str | None:
    """The nearest ``.memoree.toml`` at or above the folder ``start``, as text (no ``pathlib``)."""
    folder = os.path.abspath(start)
    while True:
        candidate = os.path.join(folder, MARKER_NAME)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def find_marker(start: Path) -> Path | None:
    """The nearest ``.memoree.toml`` at or above ``start``."""
    found = nearest_marker(os.fspath(start))
    if found is None:
        return None
    from pathlib import Path

    return Path(found)


def _read_text(path: str | os.PathLike[str]) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def read_marker(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The marker's TOML document ``{schema=1, workspace_id, project_id, name, pins}``."""
    import tomllib

    try:
        document = tomllib.loads(_read_text(path))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ContextResolutionError(f"marker {path} is not valid TOML: {exc}") from None
    if document.get("schema") != 1:
        raise ContextResolutionError(f"marker {path} must declare schema = 1")
    return document


def _from_marker(path: str) -> dict[str, Any]:
    document = read_marker(path)
    return _validated(
        {k: document[k] for k in ("workspace_id", "project_id", "pins") if k in document},
        f"marker {path}",
    )


def _from_config(config_path: str | os.PathLike[str]) -> dict[str, Any] | None:
    if not os.path.isfile(config_path):
        return None
    import tomllib

    try:
        document = tomllib.loads(_read_text(config_path))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ContextResolutionError(f"config {config_path} is not valid TOML: {exc}") from None
    personal = document.get("personal")
    if personal is None:
        return None
    return _validated(personal, f"[personal] in {config_path}")


def resolve(cwd: str | os.PathLike[str] | None = None,
            config_path: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], str] | None:
    """The ambient context and its source, or None when nothing applies."""
    raw = os.environ.get("MEMOREE_CONTEXT", "")
    if raw:
        try:
            from memoree.protocol.strictjson import loads

            document = loads(raw)
        except ValueError as exc:
            raise ContextResolutionError(f"MEMOREE_CONTEXT is not valid JSON: {exc}") from None
        return _validated(document, "MEMOREE_CONTEXT"), "session"
    marker = nearest_marker(os.fspath(cwd) if cwd is not None else os.getcwd())
    if marker is not None:
        return _from_marker(marker), "marker"
    if config_path is None:
        from memoree.client.paths import config_file_str

        config_path = config_file_str()
    personal = _from_config(config_path)
    if personal is not None:
        return personal, "personal"
    return None


def task_id_for(workspace_id: str, project_id: str, task_name: str) -> str:
    """``tsk_`` + the first 20 hex digits of BLAKE3 over ``<workspace>:<project>:<NAME>``."""
    from blake3 import blake3

    return "tsk_" + blake3(f"{workspace_id}:{project_id}:{task_name}".encode()).hexdigest()[:20]
