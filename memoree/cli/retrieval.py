"""Retrieval: ``search``, ``recall``, ``context build``, ``probe``, ``retrieve``, ``citation get``
and the evaluator (``eval``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from memoree.cli.common import (
    HorizonOption,
    ReasonOption,
    app,
    context_app,
    drop_none,
    print_document,
    send,
)

citation_app = typer.Typer(help="Fetch exactly the bytes a citation names.", no_args_is_help=True)
app.add_typer(citation_app, name="citation")

QueryArgument = typer.Argument(..., help="The query (words, \"quoted phrases\", IDENTIFIER-123).")
NoRecencyOption = typer.Option(False, "--no-recency", help="Disable the bounded recency nudge (pure lexical order).")
MinCommitSeqOption = typer.Option(None, "--min-commit-seq", help="Answer INDEX_NOT_READY until this commit is visible.")
# recall and retrieve size their answer the same way
MaxClaimsOption = typer.Option(5, "--max-claims", help="1 to 10.")
MaxArtifactRefsOption = typer.Option(3, "--max-artifact-refs", help="1 to 20.")
MaxExcerptBytesOption = typer.Option(320, "--max-excerpt-bytes", help="1 to 1024.")
NoSemanticOption = typer.Option(False, "--no-semantic", help="Turn the dense (meaning) channel off: the lexical answer.")


def _retrieval_input(query: list[str], horizon: str, reason: Optional[str], no_recency: bool,
                     min_commit_seq: Optional[int], no_semantic: bool = False, **fields: Any) -> dict[str, Any]:
    payload = drop_none(query=" ".join(query), horizon=horizon, reason=reason,
                         min_commit_seq=min_commit_seq, **fields)
    if no_recency:
        payload["recency"] = {"enabled": False}
    if no_semantic:
        payload["semantic"] = {"enabled": False}
    return payload


@app.command("search")
def search_command(
    query: list[str] = QueryArgument,
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    limit: int = typer.Option(10, "--limit", help="1 to 100 hits."),
    include_historical: bool = typer.Option(False, "--include-historical", help="Also old revisions, forgotten, retracted, future and expired."),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
) -> None:
    """Ranked hits with exact citations, including unqualified candidates."""
    send("search", _retrieval_input(query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic, limit=limit,
                                     include_historical=include_historical or None))


@app.command("recall")
def recall_command(
    query: list[str] = QueryArgument,
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    max_claims: int = MaxClaimsOption,
    max_artifact_refs: int = MaxArtifactRefsOption,
    max_excerpt_bytes: int = MaxExcerptBytesOption,
    max_candidate_claims: int = typer.Option(0, "--max-candidate-claims", help="0 to 16 unqualified claim leads."),
    max_candidate_artifact_refs: int = typer.Option(0, "--max-candidate-artifact-refs", help="0 to 16 unqualified artifact leads."),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
) -> None:
    """Claim-first recall: current or disputed claims with evidence, then artifact references."""
    send("memory.recall", _retrieval_input(
        query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic, max_claims=max_claims,
        max_artifact_refs=max_artifact_refs, max_excerpt_bytes=max_excerpt_bytes,
        max_candidate_claims=max_candidate_claims, max_candidate_artifact_refs=max_candidate_artifact_refs,
    ))


@context_app.command("build")
def context_build_command(
    query: list[str] = QueryArgument,
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    limit: int = typer.Option(10, "--limit", help="1 to 100 hits."),
    max_bytes: int = typer.Option(16384, "--max-bytes", help="Byte budget of the rendered Markdown."),
    include_historical: bool = typer.Option(False, "--include-historical"),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
) -> None:
    """Render qualified hits as byte-bounded Markdown with every source line quoted."""
    send("context.build", _retrieval_input(
        query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic, limit=limit, max_bytes=max_bytes,
        include_historical=include_historical or None,
    ))


@app.command("probe")
def probe_command(
    query: list[str] = QueryArgument,
    original_query: Optional[str] = typer.Option(None, "--original-query", help="The question this probe reformulates."),
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    max_leads: int = typer.Option(8, "--max-leads", help="1 to 8."),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
) -> None:
    """List unqualified leads (exact citations, no content) worth fetching explicitly."""
    send("memory.probe", _retrieval_input(query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic,
                                           original_query=original_query, max_leads=max_leads))


@app.command("retrieve")
def retrieve_command(
    query: list[str] = QueryArgument,
    reformulation: Optional[str] = typer.Option(None, "--reformulation", help="A rewording used only for the recovery probe."),
    horizon: str = HorizonOption,
    reason: Optional[str] = ReasonOption,
    max_claims: int = MaxClaimsOption,
    max_artifact_refs: int = MaxArtifactRefsOption,
    max_excerpt_bytes: int = MaxExcerptBytesOption,
    max_recovery_leads: int = typer.Option(8, "--max-recovery-leads", help="1 to 8."),
    max_recovery_bytes: int = typer.Option(12288, "--max-recovery-bytes", help="1 to 12288."),
    min_commit_seq: Optional[int] = MinCommitSeqOption,
    no_recency: bool = NoRecencyOption,
    no_semantic: bool = NoSemanticOption,
    profile: bool = typer.Option(False, "--profile", help="Report stage timings."),
) -> None:
    """Recall, plus one bounded recovery of unqualified exact evidence when no claim qualified."""
    send("memory.retrieve", _retrieval_input(
        query, horizon, reason, no_recency, min_commit_seq, no_semantic=no_semantic, reformulation=reformulation,
        max_claims=max_claims, max_artifact_refs=max_artifact_refs, max_excerpt_bytes=max_excerpt_bytes,
        max_recovery_leads=max_recovery_leads, max_recovery_bytes=max_recovery_bytes,
        profile=profile or None,
    ))


@citation_app.command("get")
def citation_get_command(
    citation: str = typer.Argument(..., help="memoree://artifact/ART@REV#START-END"),
    max_bytes: int = typer.Option(8192, "--max-bytes", help="4 to 8192."),
) -> None:
    """Fetch exactly the cited bytes of an artifact revision."""
    send("citation.get", {"citation": citation, "max_bytes": max_bytes})


@app.command("eval")
def eval_command(
    corpus_dir: Path = typer.Argument(..., help="A corpus folder with seed.jsonl, cases.jsonl and baseline.json, or a LoCoMo folder (26.json, ...)."),
    case: Optional[list[str]] = typer.Option(None, "--case", help="Run only this case (repeatable; skips the baseline)."),
    case_timeout_ms: int = typer.Option(60000, "--case-timeout-ms", help="Soft per-case budget (slow cases are listed)."),
    suite_timeout_ms: int = typer.Option(600000, "--suite-timeout-ms", help="Hard suite deadline (exit 124, no report)."),
    only: Optional[list[str]] = typer.Option(None, "--only", help="LoCoMo: only this conversation, e.g. 26 (repeatable)."),
    questions: Optional[int] = typer.Option(None, "--questions", help="LoCoMo: the first N questions of each conversation."),
    json_output: bool = typer.Option(False, "--json", help="LoCoMo: print the summary as JSON instead of tables."),
    report: Optional[Path] = typer.Option(None, "--report", help="LoCoMo: write per-question results (JSON Lines) here."),
) -> None:
    """Seed a temporary store from a corpus (or a LoCoMo folder), run every case, print metrics."""
    from memoree.admin.locomo import is_locomo_dir, run_cli

    if is_locomo_dir(corpus_dir.expanduser()):
        raise typer.Exit(run_cli(corpus_dir.expanduser().resolve(), only=only or (), questions=questions,
                                 as_json=json_output, report=report))
    if only or questions is not None or report is not None:
        typer.echo("error: --only, --questions and --report apply to LoCoMo folders", err=True)
        raise typer.Exit(2)
    from memoree.admin.evaluation import CorpusError, EvalOptions, main_report

    options = EvalOptions(case_ids=tuple(case or ()), case_timeout_ms=case_timeout_ms,
                          suite_timeout_ms=suite_timeout_ms)
    from memoree.cli.progress import counting

    try:
        with counting(f"eval {corpus_dir.name}") as progress:
            report, exit_code = main_report(corpus_dir.expanduser().resolve(), options, progress)
    except (CorpusError, OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if report is None:
        typer.echo(f"error: the suite passed its {suite_timeout_ms} ms deadline", err=True)
    else:
        print_document(report)
    raise typer.Exit(exit_code)
