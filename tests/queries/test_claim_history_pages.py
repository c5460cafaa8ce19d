"""claim.history pages by bytes as well as by count, so its answer always fits in a frame."""

from __future__ import annotations

import json

from memoree import limits
from tests.conftest import Caller

CTX = {"workspace_id": "wsp_hist", "project_id": "prj_hist"}


def test_the_longest_history_at_the_largest_limit_fits_a_frame_and_pages_completely(call: Caller) -> None:
    """101 revisions whose statements are 128 KiB of characters JSON doubles (quotes): at limit 100
    the page stays under the 24 MiB frame (truncated, with a cursor), and following the cursor
    returns every revision exactly once."""
    statement = '"' * limits.MAX_CLAIM_STATEMENT_BYTES
    claim = call.ok("claim.assert", {"claim_type": "fact", "statement": statement, "evidence": []},
                    key="hist-0", context=CTX)["result"]
    revision = claim["revision_id"]
    for n in range(1, 101):
        revised = call.ok("claim.revise", {"claim_id": claim["claim_id"], "if_revision": revision,
                                           "statement": statement[:-1] + str(n % 10)},
                          key=f"hist-{n}", context=CTX)["result"]
        revision = revised["revision_id"]
    seen: list[int] = []
    cursor = None
    while True:
        payload = {"claim_id": claim["claim_id"], "limit": limits.MAX_HISTORY_ITEMS}
        if cursor is not None:
            payload["before_revision_number"] = cursor
        body, _ = call.raw({"v": 1, "request_id": "h", "op": "claim.history", "input": payload})
        assert body["ok"], body
        assert len(json.dumps(body, ensure_ascii=False).encode()) <= limits.MAX_FRAME_BYTES
        page = body["result"]
        seen += [item["revision_number"] for item in page["revisions"]]
        cursor = page.get("next_before_revision_number")
        if not page["truncated"]:
            break
    assert list(range(101, 0, -1)) == seen
