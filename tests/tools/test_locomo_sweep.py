"""The LoCoMo sweep asks every scored question once per setting and puts each constant back."""

from __future__ import annotations

from pathlib import Path

import pytest

import memoree.queries.context_build as context_build
from tests.admin.test_locomo import write_dataset
from tools.bench import locomo_sweep
from tools.bench.locomo_sweep import Setting, SettingError, applied, parse_settings


class TestSettings:
    def test_a_bare_name_is_a_constant_of_the_bundle_module_at_each_value(self) -> None:
        """``NAME=a,b`` gives one setting per value, typed like the constant it replaces."""
        settings = parse_settings(["TITLE_SHARE=1,2.5", "memoree.queries.context_build:MAX_SOFT_ITEMS=32"])
        assert [s.label for s in settings] == ["TITLE_SHARE=1.0", "TITLE_SHARE=2.5", "MAX_SOFT_ITEMS=32"]
        assert isinstance(settings[2].value, int)

    @pytest.mark.parametrize("text", ["NO_SUCH_CONSTANT=1", "HEADER=1", "TITLE_SHARE=high",
                                      "MAX_SOFT_ITEMS=2.5", "TITLE_SHARE", "no.such.module:X=1"])
    def test_a_setting_that_names_no_number_or_gives_no_number_is_refused(self, text: str) -> None:
        """Unknown names, non-numeric constants, bad values and missing values raise SettingError."""
        with pytest.raises(SettingError):
            parse_settings([text])

    def test_a_setting_applies_inside_its_block_only(self) -> None:
        """The constant has the new value in the block and its old one after, even on an error."""
        before = context_build.TITLE_SHARE
        with pytest.raises(RuntimeError), applied(Setting(locomo_sweep.DEFAULT_MODULE, "TITLE_SHARE", 9.0)):
            assert context_build.TITLE_SHARE == 9.0
            raise RuntimeError
        assert context_build.TITLE_SHARE == before


class TestRun:
    def test_each_setting_is_scored_against_the_same_baseline_and_the_unchanged_run(self, tmp_path: Path) -> None:
        """The unchanged row gains and loses nothing against itself; every row covers the same questions."""
        data = write_dataset(tmp_path / "dev", names=("7", "8"))
        report = locomo_sweep.main(["--data", str(data), "--set", "CONTEXT_SHARE=0.0,0.5"])
        rows = report["rows"]
        assert [row["setting"] for row in rows] == ["unchanged", "CONTEXT_SHARE=0.0", "CONTEXT_SHARE=0.5"]
        assert (rows[0]["gain"], rows[0]["lose"]) == (0, 0)
        assert report["questions"] == 6
        assert {fold["held_out"] for fold in report["held_out"]} == {"7", "8"}

    def test_a_missing_folder_is_skipped(self, tmp_path: Path) -> None:
        """Without the data folder the sweep reports nothing."""
        assert {} == locomo_sweep.main(["--data", str(tmp_path / "absent")])
