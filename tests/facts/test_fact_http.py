"""The emem REST surface on a real HTTP server on 127.0.0.1 (ephemeral port), served by the daemon."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoree.client.transport import Endpoint, probe
from memoree.daemon.server import Daemon
from memoree.queries.facts import verify_receipt_document
from memoree.factplane.rest import ERROR_CATALOGUE, openapi_document
from memoree.service.service import Service
from tests.facts.conftest import CELL, CELL_LAT

ENVELOPE_KEYS = {"schema", "code", "message"}


class Http:
    """A tiny JSON client for one base URL."""

    def __init__(self, url: str) -> None:
        self.url = url

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any, bytes]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                content = response.read()
                return response.status, json.loads(content), content
        except urllib.error.HTTPError as exc:
            content = exc.read()
            return exc.code, json.loads(content), content

    def post(self, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any, bytes]:
        return self.request("POST", path, body, raw)

    def get(self, path: str) -> tuple[int, Any, bytes]:
        return self.request("GET", path)


def assert_envelope(status: int, body: Any, code: str) -> None:
    assert ENVELOPE_KEYS <= set(body) and body["schema"] == "emem.error.v1", body
    assert (status, body["code"]) == (ERROR_CATALOGUE[code].status, code)


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    """A daemon (unix socket + HTTP on 127.0.0.1:0) running in this process."""
    folder = tmp_path_factory.mktemp("http")
    service = Service(folder / "data")
    daemon = Daemon(service, Endpoint("unix", str(folder / "run" / "d.sock")), http=("127.0.0.1", 0))
    daemon.start()
    thread = threading.Thread(target=daemon.serve_forever, daemon=True)
    thread.start()
    yield Http(service.daemon_info["http_endpoint"])
    daemon.stop()
    thread.join(30)


class TestEndpoints:
    """Each endpoint answers over real HTTP on loopback, through the daemon's writer."""

    def test_recall_cold_then_warm(self, http: Http) -> None:
        """POST /v1/recall materializes once, then serves the same signed fact."""
        status, cold, _ = http.post("/v1/recall", {"cell": CELL, "bands": ["cell.lat_deg"]})
        assert status == 200 and cold["facts"][0]["value"] == CELL_LAT
        assert cold["materialize_notes"][0]["status"] == "materialized"
        status, warm, _ = http.post("/v1/recall", {"cell": CELL, "band": "cell.lat_deg"})
        assert (status, warm["materialize_notes"]) == (200, [])
        assert warm["facts"][0]["fact_cid"] == cold["facts"][0]["fact_cid"]

    def test_responses_match_the_served_schema(self, http: Http) -> None:
        """A scoped, bounded recall with a fact and skip notes, and the GETs, validate against /openapi.json."""
        import jsonschema

        _, document, _ = http.get("/openapi.json")
        _, recall, _ = http.post("/v1/recall", {"cell": CELL, "bands": ["cell.area_m2", "x.y"],
                                                "scope": {"org_id": "o"}, "as_of_tslot": 0})
        assert len(recall["facts"]) == 1 and len(recall["materialize_notes"]) == 2
        for name, body in (("SignedResponse", recall), ("WellKnown", http.get("/.well-known/emem.json")[1]),
                           ("ErrorCatalogue", http.get("/v1/errors")[1]), ("BandList", http.get("/v1/bands")[1])):
            jsonschema.validate(body, {"$ref": f"#/components/schemas/{name}", "components": document["components"]})

    def test_verify_receipt_untouched_and_reshaped(self, http: Http) -> None:
        """The served bytes verify; the same receipt with its proof stripped is diagnosed."""
        _, _, content = http.post("/v1/recall", {"cell": CELL, "bands": ["cell.lng_deg"]})
        receipt = json.loads(content)["receipt"]
        status, verdict, _ = http.post("/v1/verify_receipt", {"receipt": receipt})
        assert (status, verdict["valid"]) == (200, True)
        stripped = {k: v for k, v in receipt.items() if k != "merkle_proof"}
        status, verdict, _ = http.post("/v1/verify_receipt", {"receipt": stripped})
        assert (status, verdict["valid"], verdict["reason"]) == (200, False, "receipt_reshaped_after_signing")
        assert verify_receipt_document(None, receipt, None)["valid"]

    def test_verify_receipt_with_bad_key_is_422(self, http: Http) -> None:
        """A pubkey override that is not a base32 key is bad_signature (422)."""
        status, body, _ = http.post("/v1/verify_receipt", {"receipt": {}, "pubkey_b32": "nope"})
        assert_envelope(status, body, "bad_signature")

    def test_well_known_publishes_the_signing_key(self, http: Http) -> None:
        """/.well-known/emem.json names the key receipts are signed with."""
        status, known, _ = http.get("/.well-known/emem.json")
        _, recall, _ = http.post("/v1/recall", {"cell": CELL})
        assert status == 200 and known["responder"]["pubkey_b32"] == recall["receipt"]["responder"]
        assert (known["signature_alg"], known["hash_alg"]) == ("ed25519", "blake3")
        assert known["key_epoch"] == recall["receipt"]["responder_key_epoch"]

    def test_errors_catalogue_and_bands(self, http: Http) -> None:
        """/v1/errors lists every code with its status; /v1/bands lists the built-in bands."""
        status, catalogue, _ = http.get("/v1/errors")
        assert status == 200 and catalogue["schema"] == "emem.errors.v1"
        assert {c["code"]: c["http_status"] for c in catalogue["codes"]} == {
            code: entry.status for code, entry in ERROR_CATALOGUE.items()}
        status, bands, _ = http.get("/v1/bands")
        assert status == 200 and {"cell.lat_deg", "cell.lng_deg", "cell.area_m2"} <= {b["name"] for b in bands["bands"]}

    def test_openapi_describes_exactly_what_is_served(self, http: Http) -> None:
        """/openapi.json lists exactly the served routes and is the generated document."""
        status, document, _ = http.get("/openapi.json")
        assert status == 200 and document == json.loads(json.dumps(openapi_document()))
        assert set(document["paths"]) == {"/v1/recall", "/v1/verify_receipt", "/v1/bands", "/v1/errors",
                                          "/.well-known/emem.json", "/openapi.json"}

    def test_every_error_is_an_emem_envelope(self, http: Http) -> None:
        """Bad bodies, bad cells, bad bounds, unknown routes and wrong methods all get envelopes."""
        cases = [
            (http.post("/v1/recall", raw=b"{not json"), "invalid_argument"),
            (http.post("/v1/recall", {"bands": []}), "invalid_argument"),
            (http.post("/v1/recall", {"cell": CELL, "surprise": 1}), "invalid_argument"),
            (http.post("/v1/recall", {"cell": "baba.baba.baba.baba"}), "invalid_cell"),
            (http.post("/v1/recall", {"cell": CELL, "tslot": 5, "as_of_tslot": 1}), "invalid_temporal_bound"),
            (http.post("/v1/recall", {"cell": CELL, "as_of_signed_at": "soon"}), "invalid_signed_at_format"),
            (http.get("/v1/nope"), "not_found"),
            (http.get("/v1/recall"), "method_not_allowed"),
            (http.post("/v1/recall", raw=b"x" * (1024 * 1024 + 1)), "payload_too_large"),
        ]
        for (status, body, _), code in cases:
            assert_envelope(status, body, code)
        _, missing, _ = http.post("/v1/recall", {"bands": []})
        assert missing["message"] == "missing field `cell`" and missing["path"] == "/v1/recall"


class TestServeCommand:
    """`memoree serve --http` runs the REST front from the daemon process, loopback only."""

    def test_serve_http_with_listen_and_data_dir(self, tmp_path: Path) -> None:
        """A served daemon reports its HTTP endpoint and answers /v1/recall on it."""
        sock = tmp_path / "run" / "d.sock"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
        proc = subprocess.Popen([sys.executable, "-m", "memoree", "serve", "--listen", f"unix://{sock}",
                                 "--http", "127.0.0.1:0", "--data-dir", str(tmp_path / "data")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        try:
            report = None
            deadline = time.monotonic() + 60
            while report is None and time.monotonic() < deadline and proc.poll() is None:
                report = probe(Endpoint("unix", str(sock)))
                time.sleep(0.05)
            assert report is not None, proc.stdout.read() if proc.stdout else b""
            status, body, _ = Http(report["http_endpoint"]).post("/v1/recall", {"cell": CELL, "bands": ["cell.area_m2"]})
            assert status == 200 and body["facts"][0]["band"] == "cell.area_m2"
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)

    def test_non_loopback_http_is_refused(self, tmp_path: Path) -> None:
        """--http on a non-loopback address fails with CONFIG_ERROR unless deliberately allowed."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
        result = subprocess.run([sys.executable, "-m", "memoree", "serve", "--listen",
                                 f"unix://{tmp_path / 'run' / 'd.sock'}", "--http", "0.0.0.0:0",
                                 "--data-dir", str(tmp_path / "data")],
                                capture_output=True, env=env, timeout=60)
        assert result.returncode == 2 and b"non-loopback" in result.stdout


class TestSchemathesis:
    """Property-based requests from the served OpenAPI: no server errors, errors always enveloped."""

    def test_served_openapi_holds(self, http: Http) -> None:
        """Every operation, positive and negative examples: no 5xx, schema-conformant, emem envelopes."""
        import schemathesis
        from hypothesis import HealthCheck, given, settings
        from schemathesis import GenerationMode
        from schemathesis.checks import (
            content_type_conformance,
            not_a_server_error,
            response_schema_conformance,
            status_code_conformance,
        )

        schema = schemathesis.openapi.from_url(http.url + "/openapi.json")
        checks = [not_a_server_error, status_code_conformance, content_type_conformance,
                  response_schema_conformance]
        seen: dict[int, int] = {}
        for result in schema.get_all_operations():
            operation = result.ok()
            has_body = operation.method.upper() == "POST"  # GETs take no input to make negative
            modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE) if has_body else (GenerationMode.POSITIVE,)
            for mode in modes:
                @given(case=operation.as_strategy(generation_mode=mode))
                @settings(max_examples=25, deadline=None, database=None, derandomize=True,
                          suppress_health_check=list(HealthCheck))
                def exercise(case: Any) -> None:
                    response = case.call(base_url=http.url)
                    case.validate_response(response, checks=checks)
                    seen[response.status_code] = seen.get(response.status_code, 0) + 1
                    if response.status_code >= 400:
                        body = response.json()
                        assert body["schema"] == "emem.error.v1" and body["code"] in ERROR_CATALOGUE, body

                exercise()
        assert seen and max(seen) < 500 and 200 in seen
