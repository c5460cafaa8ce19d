"""The bundle diagnostic puts every gold turn of a LoCoMo question in exactly one place."""

from __future__ import annotations

from pathlib import Path

from tests.admin.test_locomo import write_dataset
from tools.bench import bundle_diag
from tools.bench.bundle_diag import Candidates, place


def candidates(*spans: list[tuple[str, int, int]], hits: tuple[str, ...] = ()) -> Candidates:
    return Candidates(list(spans), frozenset(hits))


class TestPlace:
    def test_a_found_turn_is_in_the_bundle(self) -> None:
        """Whatever the items, a turn the answer holds is in the bundle."""
        assert ("in_bundle", None) == place(("r", 0, 10), True, candidates([("r", 20, 30)]), [0])

    def test_a_turn_no_item_holds_is_no_candidate_by_its_session(self) -> None:
        """No item overlaps it: its session is among the artifact hits or beyond them."""
        items = candidates([("r", 20, 30)], hits=("r",))
        assert ("no_candidate_session_hit", None) == place(("r", 0, 10), False, items, [0])
        assert ("no_candidate_session_beyond", None) == place(("s", 0, 10), False, items, [0])

    def test_a_held_turn_above_the_last_shown_item_was_cut(self) -> None:
        """An item holding it ranks above a shown one: it did not fit."""
        items = candidates([("r", 0, 10)], [("r", 20, 30)])
        assert ("cut", 0) == place(("r", 5, 8), False, items, [1])

    def test_a_held_turn_below_every_shown_item_is_far_down(self) -> None:
        """The first item holding it ranks below everything shown."""
        items = candidates([("r", 20, 30)], [("r", 0, 10)])
        assert ("far_down", 1) == place(("r", 5, 8), False, items, [0])


class TestRun:
    def test_every_gold_turn_of_every_scored_question_gets_one_place(self, tmp_path: Path) -> None:
        """The tally counts each gold turn of the tiny conversation's scored questions once."""
        counts = bundle_diag.main(["--data", str(write_dataset(tmp_path / "dev")),
                                   "--report", str(tmp_path / "rows.jsonl")])
        assert 4 == sum(counts["all"].values())  # the multi-hop question has two
        assert set(counts["all"]) <= set(bundle_diag.PLACES)
        assert 3 == len((tmp_path / "rows.jsonl").read_text("utf-8").splitlines())

    def test_a_missing_folder_is_skipped(self, tmp_path: Path) -> None:
        """Without the data folder the diagnostic reports nothing."""
        assert {} == bundle_diag.main(["--data", str(tmp_path / "absent")])
