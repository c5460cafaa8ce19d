"""The text content of an MCP tool result: a short human summary of the envelope (what the op
did or found, a few items with excerpts), not the JSON again; the JSON travels as
``structuredContent``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["summarize"]

_SUMMARY_ITEMS = 8
_EXCERPT = 160


def summarize(op: str, envelope: dict[str, Any]) -> str:
    """A few human lines about a response; the full envelope is the structured content."""
    if not envelope.get("ok"):
        error = envelope.get("error") or {}
        hint = f" Hint: {error['hint']}" if error.get("hint") else ""
        return f"{error.get('code', 'ERROR')}: {error.get('message', '')}{hint}"
    result = envelope.get("result") or {}
    lines = [_headline(op, envelope, result)]
    lines += [f"- {item}" for item in _listed(result)[:_SUMMARY_ITEMS]]
    return "\n".join(line for line in lines if line)


def _headline(op: str, envelope: dict[str, Any], result: dict[str, Any]) -> str:
    seq = envelope.get("commit_seq")
    if seq is not None:
        verb = "done" if result.get("created", True) else "replayed (already done)"
        ids = " ".join(str(result[k]) for k in ("artifact_id", "claim_id", "relation_id", "revision_id") if k in result)
        return f"{op} {verb} at commit_seq {seq}{': ' + ids if ids else ''}."
    if isinstance(result.get("replies"), list):
        failed = [r for r in result["replies"] if isinstance(r, dict) and not r.get("ok")]
        return (f"{op}: {len(result['replies']) - len(failed)} of {len(result['replies'])} done"
                + "".join(f"; {(r.get('error') or {}).get('code')}: {(r.get('error') or {}).get('message')}"
                          for r in failed[:3]) + ".")
    for key in ("claims", "hits", "artifacts", "relations", "conflicts", "revisions", "leads", "results"):
        if isinstance(result.get(key), list):
            more = " (more: use the cursor)" if result.get("truncated") else ""
            return f"{op}: {len(result[key])} {key}{more}."
    if "content" in result and isinstance(result["content"], dict):
        return f"{result.get('title', op)} ({result.get('size_bytes', '?')} bytes): {_cut(result['content'].get('data', ''))}"
    if "statement" in result:
        return f"{result.get('claim_type', 'claim')} [{result.get('status', '')}]: {_cut(result['statement'])}"
    if isinstance(result.get("content"), str):
        return _cut(result["content"], 600)
    return f"{op}: ok."


def _listed(result: dict[str, Any]) -> list[str]:
    for key in ("claims", "hits", "artifacts", "relations", "conflicts", "revisions", "leads"):
        items = result.get(key)
        if isinstance(items, list):
            return [_item_line(item) for item in items if isinstance(item, dict)]
    return []


def _item_line(item: dict[str, Any]) -> str:
    if "statement" in item:
        return f"{_cut(item['statement'])} [{item.get('status', '')}] ({item.get('claim_id', item.get('entity_id', ''))})"
    if "relation" in item and "target_id" in item:
        return f"{item['source_id']} {item['relation']} {item['target_id']}"
    title = item.get("title") or item.get("entity_id") or item.get("case_id") or ""
    ident = item.get("artifact_id") or item.get("entity_id") or item.get("case_id") or ""
    excerpt = item.get("excerpt")
    text = excerpt.get("text") if isinstance(excerpt, dict) else excerpt if isinstance(excerpt, str) else None
    return f"{_cut(str(title))} ({ident})" + (f": {_cut(text)}" if text else "")


def _cut(text: str, limit: int = _EXCERPT) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"

