"""``memoree remember``: a caller-side composition over ``artifact.put`` and ``claim.assert``.

Not a protocol op (absent from ``capabilities`` and ``schema``). It freezes the ambient context
once; unless raw, asks the external compiler (``memoree.agents.compiler``) for a claim proposal; then
verifies that proposal here: every quote must occur exactly once in the text, and its
``[start_byte, end_byte)`` span is computed by this module, never taken from the compiler.
Deterministic findings say what was refused and why. By default it previews (prints the planned
requests and findings, writes nothing); ``apply`` sends ordinary idempotent mutations whose keys
are derived from the plan, ``remember_<BLAKE3 hex(logical op \\0 part)>``, so applying the same
text twice writes once. Findings never certify truth.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from blake3 import blake3

from memoree import limits
from memoree.client.call import CallOptions
from memoree.agents.caller import Sender, canonical_json, derived_key, envelope_error
from memoree.agents.compiler import CLAIM_TYPES, MAX_PROPOSED_CLAIMS, MAX_QUOTES
from memoree.errors import InvalidRequest, NoAmbientContext

__all__ = [
    "ARTIFACT_PLACEHOLDER",
    "DEFAULT_KIND",
    "Finding",
    "GroundedClaim",
    "Plan",
    "apply_plan",
    "build_plan",
    "byte_spans",
    "check_text",
    "default_title",
    "preview",
    "remember",
    "verify_proposal",
]

DEFAULT_KIND = "memory_note"
TEXT_MEDIA_TYPE = "text/plain; charset=utf-8"
KEY_PREFIX = "remember"
ARTIFACT_PLACEHOLDER = {"artifact_id": "$artifact.artifact_id", "revision_id": "$artifact.revision_id"}
_CLAIM_FIELDS = {"claim_type", "statement", "quotes"}
_TITLE_CHARS = 80


@dataclass(frozen=True)
class Finding:
    """One deterministic quality finding; ``error`` refuses the claim, ``warning`` only informs."""

    code: str
    level: str
    message: str
    claim_index: int | None = None
    quote_index: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class GroundedClaim:
    """A proposed claim whose every quote was found exactly once; spans are UTF-8 byte offsets."""

    claim_type: str
    statement: str
    quotes: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]

    def input_without_ids(self) -> dict[str, Any]:
        return {"claim_type": self.claim_type, "statement": self.statement,
                "evidence_spans": [list(span) for span in self.spans]}

    def claim_input(self, artifact_id: str, revision_id: str) -> dict[str, Any]:
        evidence = [{"artifact_id": artifact_id, "revision_id": revision_id,
                     "start_byte": start, "end_byte": end} for start, end in self.spans]
        return {"claim_type": self.claim_type, "statement": self.statement, "evidence": evidence}


@dataclass
class Plan:
    """Everything ``remember`` would send: one artifact, its grounded claims, their keys."""

    text: str
    context: dict[str, Any] | None
    context_source: str | None
    artifact_input: dict[str, Any]
    artifact_key: str
    claims: list[GroundedClaim] = field(default_factory=list)
    claim_keys: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    compiled: bool = True


def byte_spans(text: str, quote: str) -> list[tuple[int, int]]:
    """Every occurrence of ``quote`` in ``text`` (overlapping ones too) as UTF-8 byte spans."""
    haystack, needle = text.encode("utf-8"), quote.encode("utf-8")
    spans, start = [], haystack.find(needle)
    while needle and start >= 0:
        spans.append((start, start + len(needle)))
        start = haystack.find(needle, start + 1)
    return spans


def verify_proposal(text: str, proposal: dict[str, Any]) -> tuple[list[GroundedClaim], list[Finding]]:
    """Ground each proposed claim in ``text``; refuse those that cannot be, with findings."""
    claims: list[GroundedClaim] = []
    findings: list[Finding] = []
    proposed = proposal.get("claims", [])
    if len(proposed) > MAX_PROPOSED_CLAIMS:
        findings.append(Finding("TOO_MANY_CLAIMS", "error",
                                f"the proposal has {len(proposed)} claims; only the first "
                                f"{MAX_PROPOSED_CLAIMS} are considered"))
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(proposed[:MAX_PROPOSED_CLAIMS]):
        claim, claim_findings = _ground(text, index, item)
        findings.extend(claim_findings)
        if claim is None:
            continue
        identity = (claim.claim_type, claim.statement.strip())
        if identity in seen:
            findings.append(Finding("DUPLICATE_CLAIM", "warning",
                                    "the same claim was proposed twice; the repeat is dropped", index))
            continue
        seen.add(identity)
        claims.append(claim)
    return claims, findings


def build_plan(text: str, *, context: dict[str, Any] | None, context_source: str | None,
               proposal: dict[str, Any] | None, title: str | None = None, kind: str = DEFAULT_KIND,
               provenance: dict[str, Any] | None = None,
               idempotency_key: str | None = None) -> Plan:
    """The requests ``remember`` would send for ``text`` and an optional compiler proposal."""
    check_text(text)
    artifact_input = {
        "kind": kind,
        "title": title or default_title(text),
        "media_type": TEXT_MEDIA_TYPE,
        "content": {"type": "text", "data": text},
        "provenance": provenance or {"source": "memoree remember"},
    }
    root = idempotency_key or blake3(canonical_json(artifact_input).encode("utf-8")).hexdigest()
    plan = Plan(text=text, context=context, context_source=context_source,
                artifact_input=artifact_input,
                artifact_key=derived_key(KEY_PREFIX, "artifact.put", root),
                compiled=proposal is not None)
    if context is None:
        plan.findings.append(Finding("NO_AMBIENT_CONTEXT", "warning",
                                     "no ambient context resolves here; --apply would be refused"))
    if proposal is None:
        return plan
    plan.claims, findings = verify_proposal(text, proposal)
    plan.findings.extend(findings)
    plan.claim_keys = [derived_key(KEY_PREFIX, "claim.assert",
                                   f"{root}\0{canonical_json(claim.input_without_ids())}")
                       for claim in plan.claims]
    if not plan.claims:
        plan.findings.append(Finding("NO_CLAIMS", "warning",
                                     "no claim survived verification; only the text would be stored"))
    return plan


def preview(plan: Plan) -> dict[str, Any]:
    """The plan as a result document: the exact requests (ids as placeholders) and findings."""
    requests = [{"op": "artifact.put", "idempotency_key": plan.artifact_key, "input": plan.artifact_input}]
    for claim, key in zip(plan.claims, plan.claim_keys, strict=True):
        requests.append({"op": "claim.assert", "idempotency_key": key,
                         "input": claim.claim_input(**ARTIFACT_PLACEHOLDER)})
    return {
        "mode": "preview",
        "applied": False,
        **_summary(plan),
        "requests": requests,
    }


def apply_plan(plan: Plan, sender: Sender) -> dict[str, Any]:
    """Send the plan's mutations; raise the first failure's typed error (details say what landed)."""
    if plan.context is None:
        raise NoAmbientContext("no ambient memory context could be resolved")
    artifact = _send(sender, plan, "artifact.put", plan.artifact_input, plan.artifact_key, applied=[])
    applied: list[dict[str, Any]] = [{"op": "artifact.put", **_ack(artifact)}]
    claims = []
    artifact_id, revision_id = artifact["result"]["artifact_id"], artifact["result"]["revision_id"]
    for claim, key in zip(plan.claims, plan.claim_keys, strict=True):
        envelope = _send(sender, plan, "claim.assert", claim.claim_input(artifact_id, revision_id),
                         key, applied=applied)
        applied.append({"op": "claim.assert", **_ack(envelope)})
        claims.append(envelope["result"])
    return {
        "mode": "apply",
        "applied": True,
        **_summary(plan),
        "artifact": artifact["result"],
        "claims_applied": claims,
        "created": sum(1 for item in applied if item["created"]),
        "commit_seq": max((item["commit_seq"] for item in applied), default=None),
    }


def remember(text: str, *, apply: bool, raw: bool, frozen: tuple[dict[str, Any], str] | None,
             options: CallOptions | None = None, title: str | None = None, kind: str = DEFAULT_KIND,
             provenance: dict[str, Any] | None = None,
             idempotency_key: str | None = None) -> dict[str, Any]:
    """The whole composition: compile (unless raw), verify, then preview or apply."""
    from memoree.agents.compiler import compile_proposal, load_config

    check_text(text)
    context, context_source = frozen if frozen is not None else (None, None)
    if apply and context is None:
        raise NoAmbientContext("no ambient memory context could be resolved")
    proposal = None if raw else compile_proposal(text, load_config())
    plan = build_plan(text, context=context, context_source=context_source, proposal=proposal,
                      title=title, kind=kind, provenance=provenance, idempotency_key=idempotency_key)
    if not apply:
        return preview(plan)
    return apply_plan(plan, Sender(options))


def check_text(text: str) -> str:
    """Text remember can store: non-blank and within the artifact size limit."""
    if not text.strip():
        raise InvalidRequest("the text to remember must not be empty")
    size = len(text.encode("utf-8"))
    if size > limits.MAX_ARTIFACT_BYTES:
        raise InvalidRequest(f"the text exceeds {limits.MAX_ARTIFACT_BYTES} bytes (got {size})")
    return text


def default_title(text: str) -> str:
    """``remember: `` plus the first non-blank line, cut to a readable length."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "note")
    if len(first) > _TITLE_CHARS:
        first = first[: _TITLE_CHARS - 1].rstrip() + "…"
    return f"remember: {first}"


def _ground(text: str, index: int, item: Any) -> tuple[GroundedClaim | None, list[Finding]]:
    if not isinstance(item, dict):
        return None, [Finding("CLAIM_MALFORMED", "error", "a proposed claim must be a JSON object", index)]
    findings = []
    unknown = sorted(set(item) - _CLAIM_FIELDS)
    if unknown:
        findings.append(Finding("CLAIM_UNKNOWN_FIELD", "warning",
                                f"ignored unknown field(s): {', '.join(unknown)}", index))
    claim_type, statement, quotes = item.get("claim_type"), item.get("statement"), item.get("quotes")
    if claim_type not in CLAIM_TYPES:
        findings.append(Finding("CLAIM_TYPE_INVALID", "error", f"claim_type must be one of "
                                f"{', '.join(CLAIM_TYPES)}, got {claim_type!r}", index))
    if not isinstance(statement, str) or not statement.strip():
        findings.append(Finding("STATEMENT_EMPTY", "error", "the statement is missing or blank", index))
    elif len(statement.encode("utf-8")) > limits.MAX_CLAIM_STATEMENT_BYTES:
        findings.append(Finding("STATEMENT_TOO_LARGE", "error",
                                f"the statement exceeds {limits.MAX_CLAIM_STATEMENT_BYTES} bytes", index))
    spans = _quote_spans(text, index, quotes, findings)
    if any(f.level == "error" for f in findings) or spans is None:
        return None, findings
    assert isinstance(claim_type, str) and isinstance(statement, str)
    unique_spans = tuple(dict.fromkeys(spans))
    return GroundedClaim(claim_type, statement, tuple(quotes), unique_spans), findings


def _quote_spans(text: str, index: int, quotes: Any,
                 findings: list[Finding]) -> list[tuple[int, int]] | None:
    if not isinstance(quotes, list) or not 1 <= len(quotes) <= MAX_QUOTES:
        findings.append(Finding("QUOTE_COUNT", "error",
                                f"a claim needs 1 to {MAX_QUOTES} quotes", index))
        return None
    spans = []
    for quote_index, quote in enumerate(quotes):
        if not isinstance(quote, str) or not quote.strip():
            findings.append(Finding("QUOTE_EMPTY", "error", "a quote is missing or blank", index, quote_index))
            continue
        found = byte_spans(text, quote)
        if not found:
            findings.append(Finding("QUOTE_NOT_FOUND", "error",
                                    f"quote {_short(quote)} does not occur in the text", index, quote_index))
        elif len(found) > 1:
            findings.append(Finding("QUOTE_AMBIGUOUS", "error",
                                    f"quote {_short(quote)} occurs {len(found)} times; it must occur once",
                                    index, quote_index))
        else:
            spans.append(found[0])
    return spans


def _short(quote: str, limit: int = 60) -> str:
    return repr(quote if len(quote) <= limit else quote[: limit - 1] + "…")


def _summary(plan: Plan) -> dict[str, Any]:
    refused = {f.claim_index for f in plan.findings if f.level == "error" and f.claim_index is not None}
    return {
        "context": plan.context,
        "context_source": plan.context_source,
        "compiled": plan.compiled,
        "claims": [{"claim_type": c.claim_type, "statement": c.statement,
                    "evidence": [{"start_byte": s, "end_byte": e, "quote": q}
                                 for (s, e), q in zip(c.spans, _span_quotes(plan.text, c), strict=True)]}
                   for c in plan.claims],
        "claims_accepted": len(plan.claims),
        "claims_refused": len(refused),
        "findings": [f.to_json() for f in plan.findings],
    }


def _span_quotes(text: str, claim: GroundedClaim) -> list[str]:
    data = text.encode("utf-8")
    return [data[start:end].decode("utf-8") for start, end in claim.spans]


def _send(sender: Sender, plan: Plan, op: str, payload: dict[str, Any], key: str,
          applied: list[dict[str, Any]]) -> dict[str, Any]:
    from memoree.agents.caller import new_request

    document = new_request(op, payload, idempotency_key=key, context=plan.context,
                           context_source=plan.context_source)
    envelope, _ = sender.send(document)
    if not envelope.get("ok"):
        error = envelope_error(envelope)
        error.details = {**(error.details or {}), "failed_op": op, "applied": applied}
        raise error
    return envelope


def _ack(envelope: dict[str, Any]) -> dict[str, Any]:
    result = envelope["result"]
    entity = result.get("claim_id") or result.get("artifact_id")
    return {"id": entity, "created": bool(result.get("created")), "commit_seq": envelope.get("commit_seq")}
