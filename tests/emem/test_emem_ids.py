"""Tests for memoree.factplane.emem.ids: reason, entity and bundle cids, and tokens (§2.4, §2.5)."""

from __future__ import annotations

import pytest

from memoree.factplane.emem import ids
from memoree.factplane.emem.errors import EmemError


class TestReasonCid:
    def test_vector(self) -> None:
        """reason_cid is the 16-byte blake3 of the reason text, 26 characters."""
        assert ids.reason_cid("ocean_or_no_land_dem: test") == "dxmupsq4bq5vlhgr7h6cjsonaq"


class TestEntityCid:
    def test_location_branch_vector(self) -> None:
        """Without external ids the preimage is cell, normalised kind and label."""
        cid = ids.entity_cid(cell="defi.zb493.xuqA.zcb5f", kind="bridge", label="Test  Bridge")
        assert cid == "w4u67u6pwr2j5pfkjefhp53vpa"

    def test_external_branch_vector(self) -> None:
        """An osm id names the entity as 'osm:<id>' whatever its location or label."""
        cid = ids.entity_cid(
            cell="defi.zb400.bafi.baba", kind="x", label="y", external_ids={"osm": "way/717919508"}
        )
        assert cid == "66ayoh6h3hqkvvsd63ymqvavkm"

    def test_external_priority(self) -> None:
        """gers beats osm, which beats wikidata, which beats anchor; empty ids are skipped."""
        assert ids.best_external_id({"wikidata": "Q1", "osm": "n/1", "gers": "g"}) == "gers:g"
        assert ids.best_external_id({"wikidata": "Q1", "osm": ""}) == "wikidata:Q1"
        assert ids.best_external_id({}) is None

    def test_label_normalisation(self) -> None:
        """Labels are trimmed, lowercased and whitespace runs collapse to one space."""
        assert ids.normalise_label("  Test \t\u3000 BRIDGE\n") == "test bridge"
        assert ids.normalise_label("a\x1cb") == "a\x1cb"  # not Unicode White_Space


class TestBundleCid:
    def test_vector(self) -> None:
        """bundle_cid hashes the text preimage, not CBOR."""
        citation = ids.Citation("defi.zb4d9.pefa.zf619", "indices.ndvi", 0, "abc123")
        assert ids.bundle_cid([citation]) == "4cil2kj365mbz7vyrk4uojw4sm"

    def test_preimage_text(self) -> None:
        """The preimage has a purpose header line and one line per citation."""
        citation = ids.Citation("c", "b", 7)
        assert ids.bundle_preimage([citation], "why") == "emem.memory_bundle.v1|why\nc|b|7|\n"


class TestTokens:
    def test_format_and_parse(self) -> None:
        """Tokens round-trip through parse_token."""
        token = ids.fact_token("defi.zb400.bafi.baba", "a" * 52)
        assert token == "emem:fact:defi.zb400.bafi.baba:" + "a" * 52
        assert ids.parse_token(token) == ids.Token("fact", "a" * 52, "defi.zb400.bafi.baba")
        assert ids.parse_token(ids.bundle_token("b" * 26)) == ids.Token("bundle", "b" * 26)
        assert ids.parse_token(ids.entity_token("e" * 26)) == ids.Token("entity", "e" * 26)

    def test_legacy_prefixes(self) -> None:
        """memt:, memb: and meme: resolve like emem:fact:, emem:bundle:, emem:entity:."""
        assert ids.parse_token("memt:defi.zb400.bafi.baba:cid").kind == "fact"
        assert ids.parse_token("memb:cid") == ids.Token("bundle", "cid")
        assert ids.parse_token("meme:cid") == ids.Token("entity", "cid")

    @pytest.mark.parametrize(
        "token", ["", "emem:", "emem:note:x", "emem:fact:onlycid", "emem:bundle:a:b", "other:x"]
    )
    def test_rejects_unknown(self, token: str) -> None:
        """Unknown kinds and malformed tokens are refused."""
        with pytest.raises(EmemError):
            ids.parse_token(token)


class TestCid64:
    def test_display_form(self) -> None:
        """cid64 is base32 of the first 8 bytes: 13 characters."""
        assert len(ids.cid64(bytes(32))) == 13
