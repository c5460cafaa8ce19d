"""The fact-plane commands: `memoree band add-file`, `memoree fact recall`, `memoree receipt verify`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.facts.conftest import CELL, CELL_LAT, CELL_LNG, FAR_CELL, csv_text


def memoree(tmp_path: Path, *args: str) -> tuple[int, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")}
    env.update({"MEMOREE_HOME": str(tmp_path / "home"), "MEMOREE_IN_PROCESS": "1",
                "MEMOREE_CONTEXT": json.dumps({"workspace_id": "wsp_cli", "project_id": "prj_cli"})})
    result = subprocess.run([sys.executable, "-m", "memoree", "--data-dir", str(tmp_path / "data"), *args],
                            capture_output=True, env=env, timeout=60, cwd=tmp_path)
    return result.returncode, json.loads(result.stdout)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A file band registered from a CSV, and a recall response saved as the CLI printed it."""
    csv_file = tmp_path / "soil.csv"
    csv_file.write_text(csv_text((CELL_LAT, CELL_LNG, 6.5)))
    code, registered = memoree(tmp_path, "band", "add-file", "soil.ph", str(csv_file), "--unit", "pH",
                               "--radius-m", "25")
    assert code == 0 and registered["result"]["band"]["source_kind"] == "file", registered
    code, recalled = memoree(tmp_path, "fact", "recall", CELL, "--band", "soil.ph", "--band", "cell.lat_deg")
    assert code == 0 and [f["band"] for f in recalled["result"]["facts"]] == ["cell.lat_deg", "soil.ph"]
    path = tmp_path / "response.json"
    path.write_text(json.dumps(recalled))
    return path


class TestBandCommands:
    """`band add-file` registers a CSV band whose values recall reads from the file's samples."""

    def test_file_band_recalls_nearest_sample_and_absence(self, tmp_path: Path, saved: Path) -> None:
        """The cell on a sample gets its value; a far cell gets a signed outside_coverage absence."""
        facts = json.loads(saved.read_text())["result"]["facts"]
        assert facts[1]["value"] == 6.5 and facts[1]["provenance"] == "local.file"
        code, far = memoree(tmp_path, "fact", "recall", FAR_CELL, "--band", "soil.ph")
        assert code == 0 and far["result"]["facts"][0]["absence_reason"] == "outside_coverage"


class TestReceiptVerifyCommand:
    """`receipt verify` checks a saved response offline: signatures, proofs and fact_cids."""

    def test_untouched_response_is_valid(self, tmp_path: Path, saved: Path) -> None:
        """Every receipt in the saved envelope verifies and every fact_cid recomputes (exit 0)."""
        code, report = memoree(tmp_path, "receipt", "verify", str(saved))
        assert code == 0 and report["result"]["valid"] is True
        assert [r["where"] for r in report["result"]["receipts"]] == ["receipt", "facts[0].receipt", "facts[1].receipt"]

    def test_tampering_is_reported(self, tmp_path: Path, saved: Path) -> None:
        """A changed fact value or a changed receipt field fails (exit 1) and says where."""
        document = json.loads(saved.read_text())
        document["result"]["facts"][1]["value"] = 7.0
        document["result"]["receipt"]["served_at"] = "2030-01-01T00:00:00Z"
        saved.write_text(json.dumps(document))
        code, report = memoree(tmp_path, "receipt", "verify", str(saved))
        result = report["result"]
        assert code == 1 and result["valid"] is False
        assert result["receipts"][0]["reason"] == "signature_invalid"
        assert [p["where"] for p in result["fact_problems"]] == ["facts[1]"]

    def test_not_a_response_is_invalid(self, tmp_path: Path) -> None:
        """A file holding no receipt is an invalid request (exit 2)."""
        path = tmp_path / "x.json"
        path.write_text("[1, 2]")
        code, report = memoree(tmp_path, "receipt", "verify", str(path))
        assert code == 2 and report["error"]["code"] == "INVALID_REQUEST"
