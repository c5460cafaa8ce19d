"""The I/O-fault driver: runs a small workload once per fault point, under the LD_PRELOAD shim.

``python -m tests.reliability.fault_driver WORK_DIR KIND ERRNO[xCOUNT] MUTATIONS [K ...]`` (run by
test_io_faults.py with LD_PRELOAD=faultshim.so) opens a fresh store per fault point, arms the shim
to fail the K-th write or sync (KIND ``write``/``sync``) with ERRNO (and the COUNT-1 calls of that
kind after it: a persistent fault, as a full disk is), runs the workload through the
service (the same ``handle_bytes`` the daemon calls), seals, disarms, and takes the power-cut
image. It then checks, and prints one JSON line per K: every response is a typed envelope; the
image reopens, verifies clean and holds every acknowledged write; the live store and the image
both accept the failed requests when retried under the same keys, seal, and verify clean.
With no K it prints the workload's write and sync counts (the range of K to try).
"""

from __future__ import annotations

import ctypes
import json
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

from tests.reliability.harness import (
    ERROR_CODES,
    Ledger,
    handle,
    lost_acknowledgements,
    open_service,
    put_request,
    reconstruct,
    request,
)

KINDS = {"write": 1, "sync": 2}


def shim() -> Any:
    library = ctypes.CDLL(None)
    library.faultshim_arm.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_int, ctypes.c_long]
    library.faultshim_count.restype = ctypes.c_long
    library.faultshim_set_root.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return library


def workload(mutations: int) -> list[dict[str, Any]]:
    """Puts (inline and external-blob content) followed by a revise, a claim and a relation."""
    return [put_request(f"io-{i}", i, large_every=2) for i in range(mutations)]


def follow_ups(first: dict[str, Any], second: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        request("artifact.revise", {"artifact_id": first["artifact_id"], "if_revision": first["revision_id"],
                                    "content": {"type": "text", "data": "revised body"}}, key="io-revise"),
        request("claim.assert", {"claim_type": "fact", "statement": "the first note exists",
                                 "evidence": [{"artifact_id": second["artifact_id"], "revision_id": second["revision_id"]}]},
                key="io-claim"),
        request("relation.put", {"source_type": "artifact", "source_id": second["artifact_id"], "relation": "references",
                                 "target_type": "artifact", "target_id": first["artifact_id"]}, key="io-relation"),
    ]


def typed(envelope: dict[str, Any]) -> bool:
    if envelope.get("ok") is True:
        return "result" in envelope
    error = envelope.get("error") or {}
    return error.get("code") in ERROR_CODES and "Traceback" not in str(error.get("message"))


def seal(service: Any) -> str | None:
    from memoree.eventlog import sealing

    try:
        sealing.seal(service.engine)
    except Exception as exc:  # the daemon's writer logs seal failures the same way
        return f"{type(exc).__name__}: {exc}"
    return None


def run_workload(service: Any, mutations: int, ledger: Ledger) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Send the workload; return every envelope and the requests that were not acknowledged."""
    envelopes, failed = [], []
    documents = workload(mutations)
    for document in documents:
        send(service, document, ledger, envelopes, failed)
    acked = [ledger.acks[d["idempotency_key"]] for d in documents if d["idempotency_key"] in ledger.acks]
    if len(acked) >= 2:
        first, second = ({"artifact_id": a.artifact_id, "revision_id": a.revision_id} for a in acked[:2])
        for document in follow_ups(first, second):
            send(service, document, ledger, envelopes, failed)
    return envelopes, failed


def send(service: Any, document: dict[str, Any], ledger: Ledger, envelopes: list[dict[str, Any]],
         failed: list[dict[str, Any]]) -> None:
    envelope = handle(service, document)
    envelopes.append(envelope)
    if envelope.get("ok"):
        ledger.record(document["idempotency_key"], document, envelope)
    else:
        failed.append(document)


def resume(service: Any, failed: list[dict[str, Any]], ledger: Ledger) -> list[str]:
    """Retry the failed requests under their keys, seal and verify; the problems found."""
    from memoree.admin import verify as audit

    problems = []
    for document in failed:
        envelope = handle(service, document)
        if not envelope.get("ok"):
            problems.append(f"retry of {document['idempotency_key']} failed: {envelope.get('error')}")
        else:
            ledger.record(document["idempotency_key"], document, envelope)
    sealed = seal(service)
    if sealed:
        problems.append(f"seal after the fault failed: {sealed}")
    report = audit.verify(service.engine)
    problems.extend(f"verify: {issue['message']}" for issue in report["issues"])
    return problems


def one_fault_point(work: Path, kind: str, errno_value: int, count: int, mutations: int, k: int,
                    library: Any) -> dict[str, Any]:
    base = work / f"{kind}-{errno_value}x{count}-{k}"
    data, shadow, image = base / "data", base / "shadow", base / "image"
    shadow.mkdir(parents=True)
    library.faultshim_set_root(str(data.resolve()).encode(), str(shadow.resolve()).encode())
    ledger = Ledger()
    outcome: dict[str, Any] = {"kind": kind, "k": k}
    with open_service(data) as service:
        warm = handle(service, put_request("io-warm", 1000))
        assert warm["ok"], warm
        ledger.record("io-warm", put_request("io-warm", 1000), warm)
        library.faultshim_arm(KINDS[kind], k, errno_value, count)
        envelopes, failed = run_workload(service, mutations, ledger)
        outcome["seal_error"] = seal(service)
        library.faultshim_disarm()
        outcome["injected"] = int(library.faultshim_count(0))
        reconstruct(data, shadow, image)
        acked_at_cut = ledger.copy()
        outcome["responses"] = len(envelopes)
        outcome["errors"] = [e["error"] for e in envelopes if not e.get("ok")]
        outcome["untyped"] = [e for e in envelopes if not typed(e)]
        outcome["live_problems"] = resume(service, failed, ledger)
    outcome["acked"] = len(acked_at_cut.acks)
    with open_service(image) as service:
        outcome["image_lost"] = lost_acknowledgements(service, acked_at_cut)
        outcome["image_problems"] = resume(service, failed, Ledger())
    return outcome


def count_only(work: Path, mutations: int, library: Any) -> dict[str, int]:
    data, shadow = work / "count" / "data", work / "count" / "shadow"
    shadow.mkdir(parents=True)
    library.faultshim_set_root(str(data.resolve()).encode(), str(shadow.resolve()).encode())
    ledger = Ledger()
    with open_service(data) as service:
        handle(service, put_request("io-warm", 1000))
        library.faultshim_arm(0, 0, 0, 0)
        run_workload(service, mutations, ledger)
        seal(service)
        counts = {"writes": int(library.faultshim_count(1)), "syncs": int(library.faultshim_count(2))}
    return counts


def main(argv: list[str]) -> int:
    work, kind, mutations = Path(argv[0]), argv[1], int(argv[3])
    errno_value, _, count = argv[2].partition("x")
    library = shim()
    if len(argv) == 4:
        print(json.dumps(count_only(work, mutations, library)), flush=True)
        return 0
    for k in (int(value) for value in argv[4:]):
        try:
            outcome = one_fault_point(work, kind, int(errno_value), int(count or 1), mutations, k, library)
        except Exception:
            outcome = {"kind": kind, "k": k, "crashed": traceback.format_exc()}
        print(json.dumps(outcome, default=str), flush=True)
        shutil.rmtree(work / f"{kind}-{errno_value}x{count or 1}-{k}", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

