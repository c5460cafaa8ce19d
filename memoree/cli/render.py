"""``--human``: readable renderings of protocol envelopes for people at a terminal.

The JSON envelope stays the default output (scripts and agents parse it); ``--human`` prints the
same result as a table, key/value lines or Markdown. Errors keep their code, message and hint.
"""

from __future__ import annotations

from typing import Any

__all__ = ["render"]

_LIST_FIELDS = ("hits", "claims", "artifact_refs", "revisions", "relations", "conflicts", "leads",
                "facts", "checkpoints", "projections", "issues", "operations")
_COLUMNS = ("artifact_id", "claim_id", "relation_id", "case_id", "revision_number", "status", "state",
            "relation", "kind", "claim_type", "title", "statement", "citation", "score", "commit_seq",
            "revision_commit_seq", "relation_commit_seq", "name", "position", "lag", "message", "operation")


def render(envelope: dict[str, Any]) -> str:
    """A human rendering of one envelope (as text the terminal prints)."""
    if not envelope.get("ok"):
        error = envelope.get("error", {})
        lines = [f"error {error.get('code')}: {error.get('message')}"]
        if error.get("hint"):
            lines.append(f"hint: {error['hint']}")
        return "\n".join(lines)
    result = envelope.get("result")
    if isinstance(result, dict) and isinstance(result.get("markdown"), str):
        return result["markdown"]
    if isinstance(result, dict) and isinstance(result.get("content"), str) and result.get("format"):
        return result["content"]
    parts = []
    if isinstance(result, dict):
        for field in _LIST_FIELDS:
            rows = result.get(field)
            if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
                parts.append(_table(field, rows))
        scalars = {k: v for k, v in result.items() if not isinstance(v, (dict, list))}
        if scalars or not parts:
            parts.insert(0, _key_values(scalars or result))
    else:
        parts.append(str(result))
    if envelope.get("commit_seq") is not None:
        parts.append(f"commit_seq: {envelope['commit_seq']}")
    return "\n\n".join(parts)


def _key_values(document: dict[str, Any]) -> str:
    width = max((len(k) for k in document), default=0)
    return "\n".join(f"{k.ljust(width)}  {_short(v)}" for k, v in document.items())


def _short(value: Any, limit: int = 100) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _table(title: str, rows: list[dict[str, Any]]) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    columns = [c for c in _COLUMNS if any(c in row for row in rows)][:7] or list(rows[0])[:6]
    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*[_short(row.get(c, ""), 60) for c in columns])
    buffer = StringIO()
    Console(file=buffer, width=160, color_system=None).print(table)
    return buffer.getvalue().rstrip()
