"""The lexical read path's shortcuts return what the long way returns: membership by rowid
ranges, unit expressions trimmed to the horizon's vocabulary, the scope filter left out only
where the horizon holds every document."""

from __future__ import annotations

from typing import Any

from memoree.eventlog.db import connect
from memoree.eventlog.events import Scope
from memoree.queries import candidates
from memoree.queries.analysis import analyze_query
from memoree.queries.candidates import docs_matching, horizon_of, table_horizon, unit_expressions
from memoree.service.service import Service
from tests.conftest import CTX, Caller
from tests.queries.test_search import put, search

OTHER_PROJECT = {"workspace_id": CTX["workspace_id"], "project_id": "prj_other"}


def _fts(tmp_path: Any, rows: int) -> Any:
    conn = connect(tmp_path / "m.sqlite3")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    conn.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)",
                     [((i >> 2) << 16 | (i & 3), "common" + (" rare" if i % 7 == 0 else ""))
                      for i in range(rows)])
    return conn


def _by_lookup(conn: Any, expression: str, ids: list[int]) -> set[int]:
    return {r[0] for r in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,))} & set(ids)


class TestMembership:
    def test_the_range_read_and_the_block_reads_agree_with_a_full_match(self, tmp_path: Any) -> None:
        """Ids in 16-bit blocks (chunk rows): whether the bounded range read settles it (a rare
        word) or the per-block reads do (a word in every row), the members are exact."""
        conn = _fts(tmp_path, 4000)
        ids = sorted({((i * 37) % 1000 >> 2) << 16 | (i % 4) for i in range(40)})
        for expression in ("rare", "common", "absent"):
            expected = _by_lookup(conn, expression, ids)
            assert docs_matching(conn, "t", expression, ids, 16) == expected, expression
            assert docs_matching(conn, "t", expression, ids) == expected, expression
        conn.close()

    def test_past_the_bound_the_range_read_is_not_trusted(self, tmp_path: Any, monkeypatch: Any) -> None:
        """With the range bound at its smallest, every answer comes from the per-block reads and
        is still exact."""
        monkeypatch.setattr(candidates, "RANGE_ROWS_FLOOR", 1)
        monkeypatch.setattr(candidates, "RANGE_ROWS_PER_ID", 0)
        conn = _fts(tmp_path, 400)
        ids = [0, 1, 5 << 16, (5 << 16) | 3, 90 << 16]
        assert docs_matching(conn, "t", "common", ids, 16) == _by_lookup(conn, "common", ids)
        conn.close()


class TestUnitExpressions:
    def test_inflections_the_horizon_lacks_are_left_out(self, call: Caller, service: Service) -> None:
        """Only the word itself and the inflections some text of the horizon holds stay."""
        put(call, "the painter painted the fence")
        put(call, "paints and painting supplies", context=OTHER_PROJECT)
        scope = Scope(workspace_id=CTX["workspace_id"], project_id=CTX["project_id"], task_id=None)
        analysis = analyze_query("painting")
        [expression] = unit_expressions(service.engine.conn, horizon_of(scope, "ambient"), analysis, ())
        assert expression == '("painting" OR "painted" OR "painter")'
        [pinned] = unit_expressions(service.engine.conn, horizon_of(scope, "ambient"), analysis, ("art_x",))
        assert pinned == analysis.units[0].fts_expression

    def test_trimmed_expressions_find_the_same_hits(self, call: Caller) -> None:
        """A search for an inflected word finds every spelling the horizon holds."""
        put(call, "the painter painted the fence", title="one")
        put(call, "fresh paints for the shed", title="two")
        put(call, "painting lessons", title="three", context=OTHER_PROJECT)
        assert sorted(hit["title"] for hit in search(call, "painting")["hits"]) == ["one", "two"]


class TestScopeFilter:
    def test_the_filter_goes_only_when_the_horizon_holds_every_document(self, call: Caller,
                                                                        service: Service) -> None:
        """One project: no filter needed; a document in another project brings it back."""
        scope = Scope(workspace_id=CTX["workspace_id"], project_id=CTX["project_id"], task_id=None)
        horizon = horizon_of(scope, "ambient")
        put(call, "ledger rotation")
        assert table_horizon(service.engine.conn, "artifact", horizon).fts_scope is None
        put(call, "ledger rotation elsewhere", context=OTHER_PROJECT)
        assert table_horizon(service.engine.conn, "artifact", horizon).fts_scope == horizon.fts_scope
        assert [hit["excerpt"] for hit in search(call, "ledger")["hits"]] == ["ledger rotation"]
