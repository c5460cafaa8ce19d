"""The read-ops harness dumps the same answers twice over one built store."""

from __future__ import annotations

import json
from pathlib import Path

from tests.admin.test_locomo import write_dataset
from tools.bench import read_ops


def test_two_runs_over_one_store_dump_the_same_answers(tmp_path: Path) -> None:
    """Every question gets one line per op, and a second run over the same store writes the
    same bytes (the clock is fixed and the store copied afresh)."""
    data = write_dataset(tmp_path / "dev")
    store = tmp_path / "store"
    read_ops.main(["build", "--data", str(data), "--store", str(store)])
    dumps = []
    for name in ("first.jsonl", "second.jsonl"):
        read_ops.main(["run", "--data", str(data), "--store", str(store), "--dump", str(tmp_path / name)])
        dumps.append((tmp_path / name).read_bytes())
    assert dumps[0] == dumps[1]
    rows = [json.loads(line) for line in dumps[0].decode("utf-8").splitlines()]
    assert rows and {row["op"] for row in rows} == set(read_ops.OPS)
    assert all("error" not in row["result"] for row in rows)
