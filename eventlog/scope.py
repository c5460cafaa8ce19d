"""Scope predicates: who owns what, and what an ambient context may see or write (spec §2.9).

Ambient visibility and write scope share one rule: same workspace and project, and either no
ambient task, a project-level owner, or the same task. ``component`` is recorded, never filters.
"""

from __future__ import annotations

from memoree.errors import ScopeViolation
from memoree.eventlog.events import Scope

__all__ = ["describe", "in_ambient", "require_write_scope", "visible_at"]


def in_ambient(owner: Scope, ambient: Scope) -> bool:
    """Whether an entity owned by ``owner`` is inside the ambient context (pins ignored)."""
    return (
        owner.workspace_id == ambient.workspace_id
        and owner.project_id == ambient.project_id
        and (ambient.task_id is None or owner.task_id is None or owner.task_id == ambient.task_id)
    )


def visible_at(owner: Scope, ambient: Scope, horizon: str) -> bool:
    """Whether ``owner``'s rows are visible at ``horizon`` from ``ambient``."""
    if horizon == "personal":
        return True
    if horizon == "workspace":
        return owner.workspace_id == ambient.workspace_id
    return in_ambient(owner, ambient)


def describe(scope: Scope) -> str:
    return (f"workspace={scope.workspace_id} project={scope.project_id} "
            f"task={scope.task_id or '<project>'}")


def require_write_scope(entity: str, entity_id: str, owner: Scope, ambient: Scope) -> None:
    """Raise SCOPE_VIOLATION when ``ambient`` may not write an entity owned by ``owner``."""
    if not in_ambient(owner, ambient):
        raise ScopeViolation(
            f"{entity} {entity_id} is owned by {describe(owner)}; the ambient context is {describe(ambient)}"
        )
