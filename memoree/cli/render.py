"""``--human``: readable renderings of protocol envelopes for people at a terminal.

The JSON envelope stays the default output (scripts and agents parse it); ``--human`` prints the
same result as a table, key/value lines or Markdown. Errors keep their code, message and hint.
"""

from __future__ import annotations

from typing import Any

__all__ = ["render"]

_LIST_FIELDS = ("hits", "claims", "artifact_refs", "artifacts", "revisions", "relations", "conflicts", "leads",
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
                special = _SPECIAL.get(field) if field != "conflicts" or "source" in rows[0] else None
                parts.append(special(rows) if special else _table(field, rows))
        scalars = {k: v for k, v in result.items()
                   if not isinstance(v, (dict, list)) and not (parts and k in _NOISE)}
        if scalars or not parts:
            parts.insert(0, _key_values(scalars or result))
    else:
        parts.append(str(result))
    if envelope.get("commit_seq") is not None:
        parts.append(f"commit_seq: {envelope['commit_seq']}")
    return "\n\n".join(parts)


# Scalars that only add noise next to a list of results.
_NOISE = {"retrieval_mode", "qualification_applied", "unqualified_candidate_count",
          "best_unqualified_coverage", "content_is_untrusted", "candidate_claims_truncated",
          "candidate_artifact_refs_truncated", "unqualified_claim_candidates",
          "unqualified_artifact_candidates", "include_stale", "horizon"}


def _hits(rows: list[dict[str, Any]]) -> str:
    """Search hits as a numbered list: kind and status, title or statement, excerpt, id."""
    lines = [f"{len(rows)} hit(s)"]
    for number, hit in enumerate(rows, 1):
        kind = hit.get("entity_type", "")
        excerpt = _excerpt_text(hit.get("excerpt"))
        heading = excerpt if kind == "claim" and excerpt else hit.get("title", "")
        label = hit.get("title", "").removesuffix(" claim") if kind == "claim" else kind
        lines.append(f"{number:>2}. [{label}, {hit.get('status', '')}] {_short(heading)}  ({hit.get('entity_id', '')})")
        if excerpt and kind != "claim":
            lines.append(f"    {_short(excerpt, 140)}")
    return "\n".join(lines)


def _claims(rows: list[dict[str, Any]]) -> str:
    lines = [f"{len(rows)} claim(s)"]
    for number, claim in enumerate(rows, 1):
        lines.append(f"{number:>2}. [{claim.get('claim_type', '')}, {claim.get('status', '')}] "
                     f"{_short(claim.get('statement', ''), 140)}  ({claim.get('claim_id', '')})")
        excerpt = next((_excerpt_text(e) for e in claim.get("evidence_excerpts", []) or []), None)
        if excerpt:
            lines.append(f"    evidence: {_short(excerpt, 130)}")
    return "\n".join(lines)


def _artifacts(rows: list[dict[str, Any]]) -> str:
    lines = [f"{len(rows)} artifact(s)"]
    for number, item in enumerate(rows, 1):
        revision = f" r{item['revision_number']}" if "revision_number" in item else ""
        kind = item.get("kind") or item.get("status", "")
        lines.append(f"{number:>2}. {_short(item.get('title', ''))}  ({kind}{revision}, {item.get('artifact_id', '')})")
        excerpt = _excerpt_text(item.get("excerpt"))
        if excerpt:
            lines.append(f"    {_short(excerpt, 140)}")
    return "\n".join(lines)


def _conflicts(rows: list[dict[str, Any]]) -> str:
    """Each conflict case as its two claims side by side."""
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    table = Table(title="conflicts", show_lines=True)
    for column in ("case", "state", "source claim", "target claim"):
        table.add_column(column, overflow="fold")
    for case in rows:
        sides = []
        for side in (case.get("source") or {}, case.get("target") or {}):
            claim = side.get("current") or side.get("frozen") or {}
            sides.append(f"{claim.get('statement', '')}\n({side.get('claim_id', '')}, {claim.get('status', '')})")
        table.add_row(case.get("case_id", ""), case.get("state", ""), *sides)
    buffer = StringIO()
    Console(file=buffer, width=160, color_system=None).print(table)
    return buffer.getvalue().rstrip()


def _excerpt_text(excerpt: Any) -> str | None:
    if isinstance(excerpt, dict):
        excerpt = excerpt.get("text") or excerpt.get("content")
    return excerpt if isinstance(excerpt, str) and excerpt.strip() else None


_SPECIAL = {"hits": _hits, "claims": _claims, "artifact_refs": _artifacts, "artifacts": _artifacts,
            "conflicts": _conflicts}


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
