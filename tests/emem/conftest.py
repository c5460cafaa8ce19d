"""Shared fixtures for the emem codec tests: the upstream production fact (§2.6) and test key."""

from __future__ import annotations

import pytest

from memoree.factplane.emem import b32, cell64
from memoree.factplane.emem.facts import Derivation, PrimaryFact, Source

PRODUCTION_CELL = "defi.zb493.xuqA.zcb5f"
PRODUCTION_FACT_CID = "yqbolgeoycqkvj3zkxukb4bjw4odhpwvfzqo3fbgwf4spk45zala"
PRODUCTION_SIGNER_B32 = "777er3yihgifqmv5hmc2wwmyszgddzderzhsx6rex4yoakwomvka"
PRODUCTION_CBOR_HEX = """
ad646b696e64677072696d6172796463656c6c75646566692e7a623439332e787571412e7a63
6235666462616e647818636f7064656d33306d2e656c65766174696f6e5f6d65616e6574736c
6f74006576616c7565f9632c64756e6974616d6a636f6e666964656e6365fa3f73333367736f
757263657381a366736368656d656a6f70656e5f6d6574656f626964784e68747470733a2f2f
6170692e6f70656e2d6d6574656f2e636f6d2f76312f656c65766174696f6e3f6c6174697475
64653d31322e393731383939266c6f6e6769747564653d37372e3539333636356b6361707475
7265645f617474323032312d30342d33305430303a30303a30305a6a64657269766174696f6e
a266666e5f6b6579766f70656e5f6d6574656f5f636f7064656d39306d4031646172677382fb
4029f19caf8ce580fb405365fe9997fa646d707269766163795f636c617373667075626c6963
6a736368656d615f63696478346432347267776c713437613569736d35766b6b626975617633
776932766f65777171677934783474746e68646e7a7a6979666b71667369676e6572982018ff
18fe184818ef08183918901858183218bd183b0518ab185918981896184c183118e41864188e
184f182b18fa182418bf183018e0182a18ce18651854697369676e65645f617474323032362d
30352d32385431393a35343a33325a
"""
TEST_SEED = bytes(range(32))


@pytest.fixture
def production_cbor() -> bytes:
    return bytes.fromhex("".join(PRODUCTION_CBOR_HEX.split()))


@pytest.fixture
def production_fact() -> PrimaryFact:
    lat, lng = cell64.decode(PRODUCTION_CELL)
    return PrimaryFact(
        cell=PRODUCTION_CELL,
        band="copdem30m.elevation_mean",
        tslot=0,
        value=918.0,
        unit="m",
        confidence=0.95,
        sources=[
            Source(
                scheme="open_meteo",
                id=(
                    "https://api.open-meteo.com/v1/elevation"
                    f"?latitude={12.971899:.6f}&longitude={77.593665:.6f}"
                ),
                captured_at="2021-04-30T00:00:00Z",
            )
        ],
        derivation=Derivation(fn_key="open_meteo_copdem90m@1", args=[lat, lng]),
        privacy_class="public",
        schema_cid="d24rgwlq47a5ism5vkkbiuav3wi2voewqqgy4x4ttnhdnzziyfkq",
        signer=b32.decode(PRODUCTION_SIGNER_B32),
        signed_at="2026-05-28T19:54:32Z",
    )


@pytest.fixture
def test_seed() -> bytes:
    """The fixed §3.8 test seed: bytes 0x00..0x1f."""
    return TEST_SEED
