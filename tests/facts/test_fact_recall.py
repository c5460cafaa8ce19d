"""fact.recall through the protocol service: materialization, warm reads, bounds, filters, scope."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from memoree.factplane.emem import cell64
from memoree.factplane.emem.facts import fact_cid, fact_from_builtins
from memoree.factplane.identity import Band, cell_area_m2
from memoree.factplane.materializers import (
    REGISTRY,
    MaterializeRequest,
    Reading,
    Skip,
    run_materializer,
)
from memoree.queries.facts import verify_receipt_document
from tests.facts.conftest import CELL, CELL_LAT, CELL_LNG, FAR_CELL, Clock, FactCaller, csv_text

BUILTINS = ["cell.lat_deg", "cell.lng_deg", "cell.area_m2"]


def cids(result: dict[str, Any]) -> list[str]:
    return [fact["fact_cid"] for fact in result["facts"]]


def offline_valid(receipt: dict[str, Any]) -> bool:
    return verify_receipt_document(None, receipt, None)["valid"]


class FailingMaterializer:
    """A plugin-style materializer whose upstream always fails."""

    fn_key = "test.flaky@1"
    inline = True
    band = Band(name="test.flaky", unit="u", tempo="static", provenance_class="model_output",
                source_kind="plugin", materializer="test.flaky@1")

    def bands(self) -> list[Band]:
        return [self.band]

    def serves(self, band: Band) -> bool:
        return band.name == self.band.name

    def materialize(self, request: MaterializeRequest) -> Any:
        raise ConnectionError("upstream unreachable")


@pytest.fixture
def failing() -> Iterator[FailingMaterializer]:
    materializer = FailingMaterializer()
    REGISTRY.register(materializer)
    yield materializer
    REGISTRY.unregister(materializer)


class TestColdRecall:
    """A cold band materializes in the same call, is persisted as an event and comes back signed."""

    def test_materializes_persists_and_notes(self, facts: FactCaller) -> None:
        """A cold built-in band is signed, appended as fact.attested and noted as materialized."""
        result = facts.recall(bands=["cell.lat_deg"])
        [fact] = result["facts"]
        assert (fact["band"], fact["value"], fact["tslot"], fact["kind"]) == ("cell.lat_deg", CELL_LAT, 0, "primary")
        [note] = result["materialize_notes"]
        assert (note["status"], note["ok"], note["absence"], note["fact_cid"]) == ("materialized", True, False, fact["fact_cid"])
        assert facts.events().count("fact.attested") == 1
        assert facts.service.engine.conn.execute("SELECT fact_cid FROM facts").fetchall() == [(fact["fact_cid"],)]

    def test_fact_and_receipts_verify(self, facts: FactCaller) -> None:
        """The fact_cid recomputes from the fact's JSON and both receipts verify offline."""
        result = facts.recall(bands=BUILTINS)
        for fact in result["facts"]:
            assert fact_cid(fact_from_builtins(fact)) == fact["fact_cid"]
            assert offline_valid(fact["receipt"])
            assert fact["band_metadata"]["provenance_class"] == "deterministic_index"
        assert result["receipt"]["fact_cids"] == cids(result)
        assert result["receipt"]["cells"] == [CELL]
        assert offline_valid(result["receipt"])

    def test_builtin_values_follow_the_documented_formulas(self, facts: FactCaller) -> None:
        """cell.lat_deg, cell.lng_deg and cell.area_m2 are the grid point and the bbox's spherical area."""
        values = {f["band"]: f["value"] for f in facts.recall(bands=BUILTINS)["facts"]}
        assert values == {"cell.lat_deg": CELL_LAT, "cell.lng_deg": CELL_LNG, "cell.area_m2": cell_area_m2(CELL)}
        assert 80 < values["cell.area_m2"] < 95  # ~9.55 m x ~9.3 m at 13 degrees north

    def test_response_order_and_attested_bands(self, facts: FactCaller) -> None:
        """Facts come band-sorted, and bands_already_attested_at_cell lists what exists."""
        result = facts.recall(bands=["cell.lng_deg", "cell.area_m2"])
        assert [f["band"] for f in result["facts"]] == ["cell.area_m2", "cell.lng_deg"]
        assert result["bands_already_attested_at_cell"] == ["cell.area_m2", "cell.lng_deg"]


class TestWarmRecall:
    """A warm read returns the same signed fact without materializing or writing anything."""

    def test_same_fact_cid_without_materializing(self, facts: FactCaller) -> None:
        """The second recall returns the same fact_cids, no notes, and appends no event."""
        first = facts.recall(bands=BUILTINS)
        head = facts.head()
        second = facts.recall(bands=BUILTINS)
        assert cids(second) == cids(first)
        assert second["materialize_notes"] == []
        assert facts.head() == head
        assert second["facts"][0]["receipt"] == first["facts"][0]["receipt"]
        assert second["receipt"]["request_id"] != first["receipt"]["request_id"]

    def test_no_bands_reads_without_materializing(self, facts: FactCaller) -> None:
        """Omitting bands (or bands: []) returns every band at the cell and materializes nothing."""
        assert facts.recall()["facts"] == []
        facts.recall(bands=["cell.lat_deg"])
        head = facts.head()
        for payload in ({}, {"bands": []}):
            result = facts.recall(**payload)
            assert ([f["band"] for f in result["facts"]], result["materialize_notes"]) == (["cell.lat_deg"], [])
        assert facts.head() == head


class TestUnknownBand:
    """An unknown band answers 200 with a typed skip note, never an error or an absence."""

    def test_unknown_band_is_a_skip_note(self, facts: FactCaller) -> None:
        """facts is empty, the receipt signs no cids, and the note says unknown_band."""
        facts.recall(bands=["cell.lat_deg"])
        result = facts.recall(bands=["foo.bar"])
        assert (result["facts"], result["receipt"]["fact_cids"]) == ([], [])
        [note] = result["materialize_notes"]
        assert (note["status"], note["reason_class"], note["retryable"], note["absence"]) == ("skipped", "unknown_band", False, False)
        assert note["reason"].startswith("no_auto_materializer_registered:")
        assert result["bands_already_attested_at_cell"] == ["cell.lat_deg"]
        assert offline_valid(result["receipt"])

    def test_attested_band_has_no_materializer(self, facts: FactCaller) -> None:
        """A registered agent band with no fact yet is a no_materializer skip, not unknown."""
        facts.register("site.noise_db", "dB")
        [note] = facts.recall(bands=["site.noise_db"])["materialize_notes"]
        assert (note["reason_class"], note["retryable"]) == ("no_materializer", False)


class TestMaterializerFailure:
    """A materializer that fails or times out yields a retryable skip note, never an absence."""

    def test_failure_is_a_skip_note(self, facts: FactCaller, failing: FailingMaterializer) -> None:
        """An upstream error becomes a retryable upstream_error skip and nothing is persisted."""
        head = facts.head()
        result = facts.recall(bands=["test.flaky"])
        [note] = result["materialize_notes"]
        assert (note["status"], note["reason_class"], note["retryable"], note["absence"], note["ok"]) == (
            "skipped", "upstream_error", True, False, False)
        assert "upstream unreachable" in note["reason"]
        assert result["facts"] == []
        assert "fact.attested" not in facts.events(after=head)

    def test_timeout_is_a_retryable_skip(self) -> None:
        """A non-inline materializer past its timeout is a timeout skip."""
        import threading

        release = threading.Event()

        class Slow(FailingMaterializer):
            inline = False

            def materialize(self, request: MaterializeRequest) -> Any:
                release.wait(5)
                return Reading(value=1, sources=[], derivation=None)  # type: ignore[arg-type]

        band = Slow.band
        request = MaterializeRequest(CELL, band, 0, CELL_LAT, CELL_LNG)
        outcome, _ = run_materializer(Slow(), request, timeout_s=0.05)
        release.set()
        assert isinstance(outcome, Skip) and (outcome.reason_class, outcome.retryable) == ("timeout", True)


class TestAsOfBounds:
    """as_of_tslot and as_of_signed_at bound what a recall returns, and a past bound never materializes."""

    @pytest.fixture
    def history(self, facts: FactCaller, clock: Clock) -> dict[int, str]:
        """A fast band with facts at tslots 10, 20 and 30, signed one minute apart."""
        facts.register("air.pm25", "ugm3", tempo="fast", provenance_class="estimator")
        signed: dict[int, str] = {}
        for tslot in (10, 20, 30):
            clock.advance(60)
            result = facts.attest("air.pm25", tslot * 1.5, tslot=tslot)["result"]
            signed[tslot] = result["fact"]["signed_at"]
        return signed

    def test_unbounded_returns_every_tslot_oldest_first(self, facts: FactCaller, history: dict[int, str]) -> None:
        """Without bounds every tslot comes back, ascending."""
        assert [f["tslot"] for f in facts.recall(bands=["air.pm25"])["facts"]] == [10, 20, 30]

    def test_as_of_tslot_collapses_to_latest_below(self, facts: FactCaller, history: dict[int, str]) -> None:
        """as_of_tslot keeps tslot <= bound and collapses to the latest per band."""
        result = facts.recall(bands=["air.pm25"], as_of_tslot=25)
        assert [f["tslot"] for f in result["facts"]] == [20]
        assert result["receipt"]["as_of"] == {"valid_time": 25}
        assert offline_valid(result["receipt"])

    def test_as_of_signed_at_is_a_transaction_time_bound(self, facts: FactCaller, history: dict[int, str]) -> None:
        """as_of_signed_at keeps facts signed at or before it, offsets normalised to UTC."""
        bound = history[20].replace("Z", "+00:00")
        result = facts.recall(bands=["air.pm25"], as_of_signed_at=bound)
        assert [f["tslot"] for f in result["facts"]] == [20]
        assert result["receipt"]["as_of"] == {"transaction_time": bound}
        assert offline_valid(result["receipt"])

    def test_empty_bounded_read_gives_temporal_advice(self, facts: FactCaller, history: dict[int, str]) -> None:
        """A bound that excludes everything returns nothing, with advice that facts exist."""
        result = facts.recall(bands=["air.pm25"], as_of_tslot=5)
        assert result["facts"] == [] and result["temporal_advice"]["facts_at_cell_unbounded"] == 3

    def test_bad_bounds_are_typed_errors(self, facts: FactCaller) -> None:
        """as_of_tslot < tslot and an unparseable as_of_signed_at are typed invalid requests."""
        bad = facts("fact.recall", {"cell": CELL, "tslot": 9, "as_of_tslot": 3}, context=None)
        assert (bad["error"]["code"], bad["error"]["details"]["emem_code"]) == ("INVALID_REQUEST", "invalid_temporal_bound")
        bad = facts("fact.recall", {"cell": CELL, "as_of_signed_at": "yesterday"}, context=None)
        assert bad["error"]["details"]["emem_code"] == "invalid_signed_at_format"

    def test_past_bound_skips_materialization(self, facts: FactCaller) -> None:
        """A past as_of_signed_at never materializes: a fact signed now could not satisfy it."""
        result = facts.recall(bands=["cell.lat_deg"], as_of_signed_at="2020-01-01T00:00:00Z")
        [note] = result["materialize_notes"]
        assert (note["status"], note["reason_class"], note["absence"]) == ("skipped", "capability_unavailable", False)
        assert result["facts"] == [] and "fact.attested" not in facts.events()


class TestProvenanceFilter:
    """The provenance filter (and deterministic sugar) selects by band class before signing."""

    @pytest.fixture
    def mixed(self, facts: FactCaller) -> None:
        facts.recall(bands=["cell.lat_deg"])
        facts.register("site.noise_db", "dB")
        facts.attest("site.noise_db", 41)

    def test_deterministic_keeps_recomputable_classes(self, facts: FactCaller, mixed: None) -> None:
        """deterministic: true keeps the cell band; false keeps the agent-attested one."""
        assert [f["band"] for f in facts.recall(deterministic=True)["facts"]] == ["cell.lat_deg"]
        assert [f["band"] for f in facts.recall(deterministic=False)["facts"]] == ["site.noise_db"]

    def test_provenance_list_and_intersection(self, facts: FactCaller, mixed: None) -> None:
        """A class list filters exactly; combined with deterministic it is the intersection."""
        assert [f["band"] for f in facts.recall(provenance=["human_curated"])["facts"]] == ["site.noise_db"]
        result = facts.recall(provenance=["human_curated"], deterministic=True)
        assert (result["facts"], result["receipt"]["fact_cids"]) == ([], [])
        assert result["bands_already_attested_at_cell"] == ["cell.lat_deg", "site.noise_db"]

    def test_unknown_class_is_invalid(self, facts: FactCaller) -> None:
        """An unknown provenance class is an invalid request."""
        bad = facts("fact.recall", {"cell": CELL, "provenance": ["vibes"]}, context=None)
        assert bad["error"]["code"] == "INVALID_REQUEST"

    def test_filtered_out_band_is_not_materialized(self, facts: FactCaller) -> None:
        """A cold band whose class the filter excludes is neither materialized nor noted."""
        result = facts.recall(bands=["cell.lat_deg"], provenance=["model_output"])
        assert (result["facts"], result["materialize_notes"]) == ([], [])
        assert "fact.attested" not in facts.events()


class TestScope:
    """Scope is an exact four-tuple filter: scoped reads see only their tuple, unscoped see all."""

    A = {"user_id": "u1"}
    B = {"user_id": "u1", "agent_id": "a1"}

    @pytest.fixture
    def written(self, facts: FactCaller) -> dict[str, str]:
        facts.register("site.noise_db", "dB")
        cid = {}
        for name, scope in (("A", self.A), ("B", self.B), ("global", None)):
            fields = {"scope": scope} if scope else {}
            cid[name] = facts.attest("site.noise_db", {"A": 1, "B": 2, "global": 3}[name], **fields)["result"]["fact"]["fact_cid"]
        return cid

    def test_scoped_reads_match_exactly(self, facts: FactCaller, written: dict[str, str]) -> None:
        """{user_id} and {user_id, agent_id} are different tenants; neither sees global facts."""
        assert cids(facts.recall(bands=["site.noise_db"], scope=self.A)) == [written["A"]]
        assert cids(facts.recall(bands=["site.noise_db"], scope=self.B)) == [written["B"]]

    def test_unscoped_sees_everything_and_empty_scope_is_none(self, facts: FactCaller, written: dict[str, str]) -> None:
        """An unscoped read (or an all-empty scope) sees the latest written fact of the address."""
        for payload in ({}, {"scope": {}}):
            result = facts.recall(bands=["site.noise_db"], **payload)
            assert cids(result) == [written["global"]] and "scope" not in result["receipt"]

    def test_receipt_binds_the_scope(self, facts: FactCaller, written: dict[str, str]) -> None:
        """A scoped receipt carries and signs the scope; changing it breaks the signature."""
        receipt = facts.recall(bands=["site.noise_db"], scope=self.B)["receipt"]
        assert receipt["scope"] == self.B and offline_valid(receipt)
        assert not offline_valid({**receipt, "scope": self.A})

    def test_scoped_materialization_is_written_under_the_scope(self, facts: FactCaller) -> None:
        """A scoped cold recall materializes under its scope: visible to it and to unscoped reads only."""
        made = cids(facts.recall(bands=["cell.lat_deg"], scope=self.A))
        assert len(made) == 1
        assert cids(facts.recall(bands=["cell.lat_deg"], scope=self.A)) == made
        assert facts.recall(scope=self.B)["bands_already_attested_at_cell"] == []
        assert cids(facts.recall()) == made


class TestReceiptReshaping:
    """A receipt is byte-for-byte or nothing: reshaping fails, and the responder can say so."""

    @pytest.fixture
    def served(self, facts: FactCaller) -> dict[str, Any]:
        return facts.recall(bands=BUILTINS)["receipt"]

    def verify(self, facts: FactCaller, receipt: dict[str, Any]) -> dict[str, Any]:
        return facts.ok("receipt.verify", {"receipt": receipt}, context=None)["result"]

    def test_untouched_receipt_verifies(self, facts: FactCaller, served: dict[str, Any]) -> None:
        """The served receipt verifies at the responder and offline."""
        verdict = self.verify(facts, served)
        assert (verdict["valid"], verdict["signature_valid"], verdict["merkle_proof_valid"]) == (True, True, True)
        assert verdict["responder_is_this_node"] and offline_valid(served)

    def test_reshaped_fields_fail(self, facts: FactCaller, served: dict[str, Any]) -> None:
        """Re-keying, summarising or dropping a signed field makes the signature fail."""
        reshaped = [
            {k: v for k, v in served.items() if k != "source_versions"},
            {**served, "fact_cids": served["fact_cids"][:1]},
            {**{k: v for k, v in served.items() if k != "fact_cids"}, "factCids": served["fact_cids"]},
            {**served, "served_at": served["served_at"].replace("Z", "+00:00")},
        ]
        for receipt in reshaped:
            verdict = self.verify(facts, receipt)
            assert (verdict["valid"], verdict["reason"]) == (False, "signature_invalid"), receipt

    def test_stripped_proof_is_diagnosed_as_reshaped(self, facts: FactCaller, served: dict[str, Any]) -> None:
        """Without merkle_proof (or preimage_version) the responder proves it was reshaped; offline cannot."""
        for key in ("merkle_proof", "preimage_version"):
            stripped = {k: v for k, v in served.items() if k != key}
            verdict = self.verify(facts, stripped)
            assert (verdict["valid"], verdict["reason"]) == (False, "receipt_reshaped_after_signing")
            assert verdict["failure_detail"]
            assert verify_receipt_document(None, stripped, None)["reason"] == "signature_invalid"

    def test_cost_is_not_signed(self, facts: FactCaller, served: dict[str, Any]) -> None:
        """The unsigned cost block may change without breaking the signature."""
        assert served["cost"]["source_freshness_s"] is None
        changed = copy.deepcopy(served)
        changed["cost"]["latency_p50_ms"] = 12345
        assert self.verify(facts, changed)["valid"]

    def test_malformed_receipt_is_a_typed_error(self, facts: FactCaller) -> None:
        """A receipt whose key is not base32 is bad_signature, not a crash."""
        bad = facts("receipt.verify", {"receipt": {"responder": "NOT-B32", "signature": ""}}, context=None)
        assert bad["error"]["details"]["emem_code"] == "bad_signature"


class TestFileBands:
    """CSV file bands: the nearest sample within the radius, else a signed outside_coverage absence."""

    @pytest.fixture
    def soil(self, facts: FactCaller) -> dict[str, Any]:
        text = csv_text((CELL_LAT + 0.0001, CELL_LNG, 6.5), (CELL_LAT + 0.01, CELL_LNG, 7.25))
        return facts.register("soil.ph", "pH", provenance_class="deterministic_index",
                              file={"csv": text, "dataset_id": "soil-survey", "radius_m": 50,
                                    "captured_at": "2024-03-01T00:00:00Z"})["result"]

    def test_nearest_sample_is_a_signed_local_fact(self, facts: FactCaller, soil: dict[str, Any]) -> None:
        """A cell near a sample gets its value, cited as local.file with the CSV's SHA-256."""
        [fact] = facts.recall(bands=["soil.ph"])["facts"]
        assert (fact["value"], fact["unit"], fact["provenance"]) == (6.5, "pH", "local.file")
        [source] = fact["sources"]
        assert source["id"].startswith("soil-survey/") and len(source["hash"]) == 32
        assert source["captured_at"] == "2024-03-01T00:00:00Z"
        assert fact["band_metadata"]["provenance_class"] == "deterministic_index"
        assert fact_cid(fact_from_builtins(fact)) == fact["fact_cid"]

    def test_outside_coverage_is_a_signed_absence(self, facts: FactCaller, soil: dict[str, Any]) -> None:
        """A far cell gets a signed absence (materialized, absence: true) that stays warm."""
        result = facts.recall(cell=FAR_CELL, bands=["soil.ph"])
        [fact] = result["facts"]
        assert (fact["kind"], fact["value"], fact["absence_reason"]) == ("absence", None, "outside_coverage")
        [note] = result["materialize_notes"]
        assert (note["status"], note["absence"]) == ("materialized", True)
        assert offline_valid(fact["receipt"]) and fact_cid(fact_from_builtins(fact)) == fact["fact_cid"]
        again = facts.recall(cell=FAR_CELL, bands=["soil.ph"])
        assert (cids(again), again["materialize_notes"]) == (cids(result), [])

    def test_freshness_counts_the_dated_source(self, facts: FactCaller, soil: dict[str, Any]) -> None:
        """source_freshness_s is the age of the stalest captured_at."""
        freshness = facts.recall(bands=["soil.ph"])["receipt"]["cost"]["source_freshness_s"]
        assert isinstance(freshness, int) and freshness > 365 * 86400

    def test_file_band_rules(self, facts: FactCaller, soil: dict[str, Any]) -> None:
        """File bands cannot be attested; an identical re-registration replays, another conflicts."""
        bad = facts("fact.attest", {"cell": CELL, "band": "soil.ph", "value": 1}, key="x")
        assert bad["ok"] is False
        text = csv_text((CELL_LAT + 0.0001, CELL_LNG, 6.5), (CELL_LAT + 0.01, CELL_LNG, 7.25))
        same = facts.ok("band.register", {"band": "soil.ph", "unit": "pH", "provenance_class": "deterministic_index",
                                          "file": {"csv": text, "dataset_id": "soil-survey", "radius_m": 50,
                                                   "captured_at": "2024-03-01T00:00:00Z"}}, key="again")
        assert (same["commit_seq"], same["result"]["created"]) == (soil["commit_seq"], False)
        other = facts("band.register", {"band": "soil.ph", "unit": "pH"}, key="other")
        assert other["ok"] is False

    def test_local_bands_are_never_direct_sensor(self, facts: FactCaller) -> None:
        """Registering a band as direct_sensor is refused, and a malformed CSV is invalid."""
        bad = facts("band.register", {"band": "x.y", "unit": "u", "provenance_class": "direct_sensor"}, key="k1")
        assert bad["error"]["code"] == "INVALID_REQUEST"
        bad = facts("band.register", {"band": "x.z", "unit": "u", "file": {"csv": "a,b\n1,2\n", "dataset_id": "d"}}, key="k2")
        assert "lat,lng,value" in bad["error"]["message"]


class TestAttest:
    """fact.attest signs one fact in a registered band as one idempotent event."""

    def test_unregistered_band_is_refused(self, facts: FactCaller) -> None:
        """Attesting an unregistered band is band_not_in_registry."""
        bad = facts("fact.attest", {"cell": CELL, "band": "nope.nope", "value": 1}, key="k")
        assert bad["error"]["details"]["emem_code"] == "band_not_in_registry"

    def test_attest_is_signed_and_idempotent(self, facts: FactCaller) -> None:
        """The result carries a verifying receipt, and a retry replays the same fact and commit_seq."""
        facts.register("site.noise_db", "dB")
        payload = {"cell": CELL, "band": "site.noise_db", "value": 41.5, "unit": "dB"}
        first = facts.ok("fact.attest", payload, key="same")
        again = facts.ok("fact.attest", payload, key="same")
        assert (again["commit_seq"], again["result"]["fact"]["fact_cid"], again["result"]["created"]) == (
            first["commit_seq"], first["result"]["fact"]["fact_cid"], False)
        fact = first["result"]["fact"]
        assert fact["band_metadata"]["provenance_class"] == "human_curated"
        assert fact["sources"] == [{"scheme": "memoree.agent", "id": "wsp_test/prj_test"}]
        assert offline_valid(first["result"]["receipt"])

    def test_identical_fact_in_the_same_second_is_not_minted_twice(self, facts: FactCaller) -> None:
        """The same fact under a new key, in the same second, is a no-op pointing at the first."""
        facts.register("site.noise_db", "dB")
        payload = {"cell": CELL, "band": "site.noise_db", "value": 40}
        first = facts.ok("fact.attest", payload, key="one")
        second = facts.ok("fact.attest", payload, key="two")
        assert (second["commit_seq"], second["result"]["created"]) == (first["commit_seq"], False)
        assert second["result"]["fact"]["fact_cid"] == first["result"]["fact"]["fact_cid"]
        assert facts.events().count("fact.attested") == 1

    def test_unit_and_tslot_must_fit_the_band(self, facts: FactCaller) -> None:
        """A unit other than the band's, or a nonzero tslot on a static band, is refused."""
        facts.register("site.noise_db", "dB")
        bad = facts("fact.attest", {"cell": CELL, "band": "site.noise_db", "value": 1, "unit": "m"}, key="k1")
        assert bad["error"]["details"]["emem_code"] == "invalid_argument"
        bad = facts("fact.attest", {"cell": CELL, "band": "site.noise_db", "value": 1, "tslot": 4}, key="k2")
        assert bad["error"]["details"]["emem_code"] == "tslot_mismatch"

    def test_observed_at_sets_the_tslot(self, facts: FactCaller) -> None:
        """A fast band's tslot is the observation's day since the Unix epoch."""
        facts.register("air.pm25", "ugm3", tempo="fast")
        fact = facts.attest("air.pm25", 12, observed_at="2024-01-01T06:00:00+02:00")["result"]["fact"]
        assert fact["tslot"] == 19723


class TestReindex:
    """Replaying the log reproduces the facts projection exactly."""

    def test_reindex_reproduces_fact_rows(self, facts: FactCaller) -> None:
        """Dropping and rebuilding every projection gives identical facts, bands and results."""
        facts.recall(bands=BUILTINS, scope={"run_id": "r1"})
        facts.register("soil.ph", "pH", file={"csv": csv_text((CELL_LAT, CELL_LNG, 7)), "dataset_id": "s"})
        facts.recall(cell=FAR_CELL, bands=["soil.ph"])
        facts.register("site.noise_db", "dB")
        facts.attest("site.noise_db", [1, 2.5])
        engine = facts.service.engine
        tables = ("facts", "fact_bands", "idempotency_results")

        def snapshot() -> dict[str, list[tuple[Any, ...]]]:
            return {t: engine.conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}

        before = snapshot()
        assert len(before["facts"]) == 5
        engine.reindex(["facts"])
        assert snapshot() == before
        engine.reindex()
        assert snapshot() == before
        assert cell64.validate(before["facts"][0][1])
