"""The signed fact plane (emem): ``band ...``, ``fact ...`` and the offline ``receipt verify``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from memoree.cli.common import (
    IdemOption,
    app,
    drop_none,
    fail,
    ok,
    read_source,
    send,
)

band_app = typer.Typer(help="Register and list the bands signed facts are recorded in.", no_args_is_help=True)
fact_app = typer.Typer(help="Attest and recall signed facts at a cell64.", no_args_is_help=True)
receipt_app = typer.Typer(help="Check signed receipts offline.", no_args_is_help=True)
app.add_typer(band_app, name="band")
app.add_typer(fact_app, name="fact")
app.add_typer(receipt_app, name="receipt")

ProvenanceOption = typer.Option("human_curated", "--provenance-class", help="deterministic_index, estimator, attested_execution, model_output, human_curated or unclassified.")


@band_app.command("add-file")
def band_add_file(
    band: str = typer.Argument(..., help="Band key, e.g. soil.ph_topsoil."),
    csv_file: Path = typer.Argument(..., help="CSV with lat,lng,value columns."),
    unit: str = typer.Option(..., "--unit", help="The values' unit, e.g. pH, m, degC."),
    radius_m: float = typer.Option(100.0, "--radius-m", help="Use the nearest sample within this many metres; farther cells get a signed outside_coverage absence."),
    provenance_class: str = typer.Option("deterministic_index", "--provenance-class", help="What the data honestly is: deterministic_index, estimator, model_output, human_curated, ... (never direct_sensor)."),
    dataset_id: Optional[str] = typer.Option(None, "--dataset-id", help="Dataset name in the facts' source id (default: the file's stem)."),
    captured_at: Optional[str] = typer.Option(None, "--captured-at", help="The data's date (RFC 3339), cited as the source's captured_at."),
    description: Optional[str] = typer.Option(None, "--description"),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Register a band whose values recall reads from a CSV file (stored in the log)."""
    data, _ = read_source(str(csv_file))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        typer.echo(f"error: {csv_file} is not UTF-8 text", err=True)
        raise typer.Exit(2) from None
    send("band.register", drop_none(
        band=band, unit=unit, tempo="static", provenance_class=provenance_class,
        description=description, actor=os.environ.get("MEMOREE_ACTOR") or None,
        file=drop_none(csv=text, dataset_id=dataset_id or csv_file.stem, radius_m=radius_m,
                        captured_at=captured_at),
    ), idempotency_key=idempotency_key)


@band_app.command("register")
def band_register(
    band: str = typer.Argument(..., help="Band key, e.g. site.noise_db."),
    unit: str = typer.Option(..., "--unit"),
    tempo: str = typer.Option("static", "--tempo", help="static, slow, composite_16day, composite_8day, medium, fast or ultra_fast."),
    provenance_class: str = ProvenanceOption,
    description: Optional[str] = typer.Option(None, "--description"),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Register a band whose facts agents attest (fact.attest)."""
    send("band.register", drop_none(
        band=band, unit=unit, tempo=tempo, provenance_class=provenance_class,
        description=description, actor=os.environ.get("MEMOREE_ACTOR") or None,
    ), idempotency_key=idempotency_key)


@band_app.command("list")
def band_list() -> None:
    """List the bands served here (built in, registered, plugins) with their provenance classes."""
    send("band.list", {})


def _fact_value(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text  # a categorical class id
    return value if isinstance(value, (int, float, list)) and not isinstance(value, bool) else text


@fact_app.command("attest")
def fact_attest(
    cell: str = typer.Argument(..., help="cell64, e.g. defi.zb493.xuqA.zcb5f."),
    band: str = typer.Argument(...),
    value: str = typer.Argument(..., help="A number, a JSON array of numbers, or a class id."),
    tslot: Optional[int] = typer.Option(None, "--tslot"),
    observed_at: Optional[str] = typer.Option(None, "--observed-at", help="RFC 3339; sets the tslot from the band's tempo."),
    confidence: float = typer.Option(1.0, "--confidence"),
    idempotency_key: Optional[str] = IdemOption,
) -> None:
    """Sign and record one fact in a registered band."""
    send("fact.attest", drop_none(
        cell=cell, band=band, value=_fact_value(value), tslot=tslot, observed_at=observed_at,
        confidence=confidence, actor=os.environ.get("MEMOREE_ACTOR") or None,
    ), idempotency_key=idempotency_key)


@fact_app.command("recall")
def fact_recall(
    cell: str = typer.Argument(...),
    band: Optional[list[str]] = typer.Option(None, "--band", help="A band to ensure (repeatable; cold ones materialize)."),
    tslot: Optional[int] = typer.Option(None, "--tslot"),
    deterministic: Optional[bool] = typer.Option(None, "--deterministic/--non-deterministic"),
) -> None:
    """Recall the signed facts at a cell (the same as POST /v1/recall)."""
    send("fact.recall", drop_none(cell=cell, bands=band, tslot=tslot, deterministic=deterministic))


def _receipts_in(document: Any) -> tuple[list[tuple[str, Any]], list[Any]]:
    """``(where, receipt)`` pairs and the facts of a saved response, envelope or bare receipt."""
    if isinstance(document, dict) and isinstance(document.get("result"), dict):
        document = document["result"]  # a protocol envelope around a recall result
    if isinstance(document, dict) and "signature" in document and "fact_cids" in document:
        return [("receipt", document)], []
    if not isinstance(document, dict) or not isinstance(document.get("receipt"), dict):
        return [], []
    facts = document.get("facts") if isinstance(document.get("facts"), list) else []
    if isinstance(document.get("fact"), dict):
        facts = [document["fact"]]
    pairs = [("receipt", document["receipt"])]
    pairs += [(f"facts[{i}].receipt", f["receipt"]) for i, f in enumerate(facts)
              if isinstance(f, dict) and isinstance(f.get("receipt"), dict)]
    return pairs, facts


def _check_fact_cids(facts: list[Any], receipt: Any) -> list[dict[str, Any]]:
    """Each fact's cid recomputed from its JSON, and the receipt binding exactly those cids."""
    from memoree.factplane.emem.errors import EmemError
    from memoree.factplane.emem.facts import fact_cid, fact_from_builtins

    problems = []
    for index, fact in enumerate(facts):
        try:
            recomputed = fact_cid(fact_from_builtins(fact))
        except EmemError as exc:
            problems.append({"where": f"facts[{index}]", "problem": f"not a fact: {exc}"})
            continue
        if recomputed != fact.get("fact_cid"):
            problems.append({"where": f"facts[{index}]", "problem": "fact_cid does not match its body",
                             "recomputed": recomputed})
    listed = [fact.get("fact_cid") for fact in facts if isinstance(fact, dict)]
    if facts and isinstance(receipt, dict) and receipt.get("fact_cids") != listed:
        problems.append({"where": "receipt.fact_cids", "problem": "does not list the facts' cids in order"})
    return problems


@receipt_app.command("verify")
def receipt_verify(
    file: str = typer.Argument(..., help="A saved /v1/recall response (or a bare receipt, or a protocol envelope); - for stdin."),
    pubkey: Optional[str] = typer.Option(None, "--pubkey", help="Verify under this base32 key instead of each receipt's responder."),
) -> None:
    """Check a saved response offline: every receipt's signature and proof, every fact_cid."""
    from memoree.errors import InvalidRequest, MemoreeError
    from memoree.queries.facts import verify_receipt_document

    data, _ = read_source(file)
    try:
        document = json.loads(data)
    except ValueError as exc:
        fail(InvalidRequest(f"{file} is not JSON: {exc}"))
    pairs, facts = _receipts_in(document)
    if not pairs:
        fail(InvalidRequest("no receipt found (expected a recall response, an envelope around one, or a receipt)"))
    verdicts = []
    for where, receipt in pairs:
        try:
            verdict = verify_receipt_document(None, receipt, pubkey)
        except MemoreeError as exc:
            verdict = {"valid": False, "error": exc.to_body()}
        verdicts.append({"where": where, **verdict})
    problems = _check_fact_cids(facts, pairs[0][1])
    valid = all(v["valid"] for v in verdicts) and not problems
    ok({"valid": valid, "receipts": verdicts, "fact_problems": problems,
        "note": "offline: a reshaped receipt cannot be told from a forged one; POST /v1/verify_receipt to the responder can"})
    raise typer.Exit(0 if valid else 1)
