"""Without the optional ``memoree[postgres]`` extra, a configured shared log fails with a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Runs one in-process request with the PostgreSQL driver made unimportable (as in an install
# without the extra) and prints the envelope.
_WITHOUT_DRIVER = """
import sys
sys.modules["psycopg"] = None  # `import psycopg` now raises ImportError
from pathlib import Path
from memoree.client.call import CallOptions, run
body, code = run(sys.argv[2].encode(), CallOptions(data_dir=Path(sys.argv[1]), in_process=True))
print(code)
print(body.decode())
"""


def test_a_log_url_without_the_extra_names_the_extra(tmp_path: Path) -> None:
    """MEMOREE_LOG_URL set without psycopg installed answers CONFIG_ERROR naming memoree[postgres]."""
    request = json.dumps({"v": 1, "request_id": "req_1", "op": "doctor", "input": {}})
    env = {**os.environ, "MEMOREE_LOG_URL": "postgresql://nobody@127.0.0.1:1/none",
           "MEMOREE_HOME": str(tmp_path / "home")}
    result = subprocess.run([sys.executable, "-c", _WITHOUT_DRIVER, str(tmp_path / "data"), request],
                            capture_output=True, text=True, env=env, timeout=60)
    code, body = result.stdout.split("\n", 1)
    envelope = json.loads(body)
    assert ("2", False, "CONFIG_ERROR") == (code, envelope["ok"], envelope["error"]["code"]), result.stderr
    assert "memoree[postgres]" in envelope["error"]["message"]
    assert {"extra": "postgres"} == envelope["error"]["details"]
    assert "pip install 'memoree[postgres]'" in envelope["error"]["hint"]


def test_the_embedded_store_never_needs_the_driver(tmp_path: Path) -> None:
    """With no log URL, a store opens and answers without psycopg importable."""
    request = json.dumps({"v": 1, "request_id": "req_1", "op": "doctor", "input": {}})
    env = {key: value for key, value in os.environ.items() if key != "MEMOREE_LOG_URL"}
    env["MEMOREE_HOME"] = str(tmp_path / "home")
    result = subprocess.run([sys.executable, "-c", _WITHOUT_DRIVER, str(tmp_path / "data"), request],
                            capture_output=True, text=True, env=env, timeout=60)
    code, body = result.stdout.split("\n", 1)
    assert ("0", True) == (code, json.loads(body)["ok"]), result.stderr
