"""The put-parts benchmark runs end to end in quick mode (no figure is asserted but its sign)."""

from __future__ import annotations

from pathlib import Path

from memoree.eventlog.db import DB_FILENAME, connect
from tools.bench import putparts


def test_putparts_benchmark_reports_each_variant_against_the_same_raw_baseline(capsys: object) -> None:
    """Every variant, lone puts and the bulk lane, gives a positive rate beside one raw figure."""
    for mode, extra in (("put", []), ("bulk", ["--bulk", "10"])):
        rows = putparts.main(["--quick", *extra])
        assert [row.name for row in rows] == [f"{mode}: {name}" for name in putparts.VARIANTS]
        assert all(row.ours > 0 for row in rows)
        assert len({row.baseline for row in rows}) == 1 and rows[0].baseline > 0


def test_a_put_without_projectors_still_answers_and_writes_its_event(tmp_path: Path) -> None:
    """Filtering the handler's projectors keeps the put a real, acknowledged append."""
    folder = tmp_path / "store"
    assert putparts.service_put_rate(folder, putparts.texts(6), lambda name: False) > 0
    conn = connect(folder / "data" / DB_FILENAME, readonly=True)
    try:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 6
    finally:
        conn.close()
