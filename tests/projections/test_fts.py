"""The fts projection: index text, exact chunk offsets, apply order, and rebuild by replay."""

from __future__ import annotations

from typing import Any

from memoree.projections import sync_projectors
from memoree.projections.fts import FTS_INDEXES, RETIRED_INDEXES, FtsProjector
from memoree.service.engine import Engine
from tests.conftest import CTX, Caller

CONTENT_TABLES = ("artifact_search_text", "artifact_chunks", "claim_search_text")
PROBES = ("cache", "sqlite", "wal", "notes", "chunk", '"abc"', "use")


def put(call: Caller, text: str, title: str = "note", media_type: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"kind": "note", "title": title, "content": {"type": "text", "data": text}}
    if media_type:
        payload["media_type"] = media_type
    call.counter += 1
    return call.ok("artifact.put", payload, key=f"p{call.counter}")["result"]


def chunk_rows(conn: Any, revision_id: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT c.row_kind, c.ordinal, c.start_byte, c.end_byte, t.title, t.body FROM artifact_chunks c "
        "JOIN artifact_chunk_text t ON t.chunk_id = c.chunk_id WHERE c.revision_id = ? ORDER BY c.chunk_id",
        (revision_id,),
    ).fetchall()


def index_answers(conn: Any) -> dict[tuple[str, str], list[int]]:
    """What every index answers for a few probe queries (rowids), a view of the index itself."""
    answers = {}
    for index in FTS_INDEXES:
        for probe in PROBES:
            rows = conn.execute(f"SELECT rowid FROM {index} WHERE {index} MATCH ? ORDER BY rowid", (probe,))
            answers[(index, probe)] = [row[0] for row in rows]
    return answers


def snapshot(conn: Any) -> dict[str, Any]:
    tables = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in CONTENT_TABLES}
    chunk_text = conn.execute("SELECT * FROM artifact_chunk_text ORDER BY 1").fetchall()
    return {"tables": tables, "chunk_text": chunk_text, "answers": index_answers(conn)}


def populate(call: Caller) -> None:
    first = put(call, "# Cache notes\n\nThe cache uses SQLite with WAL.\n\n" + "A chunk of filler text. " * 400)
    call.ok("artifact.revise", {"artifact_id": first["artifact_id"], "if_revision": first["revision_id"],
                                "content": {"type": "text", "data": "Revised cache notes: abc."}}, key="rev")
    put(call, "binary-ish bytes", title="sqlite diagram", media_type="application/octet-stream")
    gone = put(call, "notes to forget about the cache")
    call.ok("artifact.forget", {"artifact_id": gone["artifact_id"], "reason": "obsolete"}, key="forget")
    made = call.ok("claim.assert", {"claim_type": "fact", "statement": "The cache uses WAL"}, key="c")["result"]
    call.ok("claim.revise", {"claim_id": made["claim_id"], "if_revision": made["revision_id"],
                             "statement": "The cache uses SQLite WAL"}, key="cr")


class TestIndexRows:
    """Every artifact revision gets a spanless title row and body rows that tile its bytes exactly."""

    def test_chunks_tile_the_body_bytes_exactly(self, call: Caller) -> None:
        """Body rows are contiguous from byte 0 to the end and their text is exactly those bytes."""
        body = "# Heading\n\nIntro paragraph with ünïcode.\n\n" + "Sentence number one. " * 600
        made = put(call, body, title="long")
        rows = chunk_rows(call.service.engine.conn, made["revision_id"])
        assert ("title", None, None, None, "long", "") == rows[0]
        spans = [(start, end) for _, _, start, end, _, _ in rows[1:]]
        data = body.encode()
        assert spans[0][0] == 0 and spans[-1][1] == len(data) and len(spans) > 1
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert [ordinal for _, ordinal, *_ in rows[1:]] == list(range(len(spans)))
        assert all(text == data[start:end].decode() for _, _, start, end, _, text in rows[1:])

    def test_non_textual_bodies_index_only_the_title(self, call: Caller) -> None:
        """A binary media type contributes no body text and no body chunks."""
        made = put(call, "words that stay unindexed", title="picture", media_type="image/png")
        conn = call.service.engine.conn
        assert [("picture", "")] == conn.execute(
            "SELECT title, body FROM artifact_search_text WHERE revision_id = ?", (made["revision_id"],)).fetchall()
        assert ["title"] == [row[0] for row in chunk_rows(conn, made["revision_id"])]

    def test_claim_revisions_are_indexed_by_statement(self, call: Caller) -> None:
        """Each claim revision adds its statement; earlier revisions stay indexed for history."""
        made = call.ok("claim.assert", {"claim_type": "fact", "statement": "first wording"}, key="a")["result"]
        call.ok("claim.revise", {"claim_id": made["claim_id"], "if_revision": made["revision_id"],
                                 "statement": "second wording"}, key="b")
        rows = call.service.engine.conn.execute(
            "SELECT claim_id, statement FROM claim_search_text ORDER BY doc_id").fetchall()
        assert [(made["claim_id"], "first wording"), (made["claim_id"], "second wording")] == rows

    def test_lifecycle_is_joined_not_copied(self, call: Caller) -> None:
        """Forgetting writes no fts rows: the index keeps the text and search filters by join."""
        made = put(call, "forget me later")
        conn = call.service.engine.conn
        before = snapshot(conn)
        call.ok("artifact.forget", {"artifact_id": made["artifact_id"], "reason": "done"}, key="f")
        assert before == snapshot(conn)
        assert [] == call.ok("search", {"query": "forget later"})["result"]["hits"]


class TestApplyOrder:
    """The fts projector runs in the mutation's transaction, after entities and before idempotency."""

    def test_sync_projectors_order(self, call: Caller) -> None:
        """fts follows every entity-state projector and precedes idempotency, which stays last."""
        names = [p.name for p in sync_projectors(call.service.engine.cas)]
        assert names.index("fts") > max(names.index(n) for n in ("entities", "relations", "conflicts"))
        assert "idempotency" == names[-1]
        assert isinstance(call.service.engine.projectors[names.index("fts")], FtsProjector)

    def test_a_write_is_searchable_at_its_own_commit_seq(self, call: Caller) -> None:
        """Read-your-writes: the acknowledged commit_seq is already indexed."""
        made = call.ok("artifact.put", {"kind": "n", "title": "instant", "content": {"type": "text", "data": "visible now"}},
                       key="k", context=CTX)
        hits = call.ok("search", {"query": "visible now", "min_commit_seq": made["commit_seq"]})["result"]["hits"]
        assert [made["result"]["artifact_id"]] == [hit["entity_id"] for hit in hits]


class TestRebuild:
    """Replaying the log rebuilds the same content rows and an index that answers the same."""

    def test_a_store_of_an_earlier_version_loses_its_retired_indexes_on_open(self, call: Caller) -> None:
        """An earlier version's indexes that nothing reads (trigram, chunk words) are dropped
        when the store opens, and the rebuilt word indexes answer as before."""
        populate(call)
        engine = call.service.engine
        before = snapshot(engine.conn)
        for index in RETIRED_INDEXES:
            engine.conn.execute(f"CREATE VIRTUAL TABLE {index} USING fts5(x, tokenize='trigram')")
        engine.conn.execute("UPDATE projector_checkpoints SET version = 3 WHERE name = 'fts'")
        call.service.close()
        reopened = Engine(call.service.data_dir)
        names = {row[0] for row in reopened.conn.execute("SELECT name FROM sqlite_master")}
        assert not any(name.startswith(RETIRED_INDEXES) for name in names)
        assert before == snapshot(reopened.conn)
        assert reopened.conn.execute("SELECT version FROM projector_checkpoints WHERE name = 'fts'").fetchone()[0] == FtsProjector.version
        reopened.close()

    def test_a_store_of_version_5_drops_its_column_sizes_on_open(self, call: Caller) -> None:
        """A version-5 store's word indexes, which kept per-document column sizes, are rebuilt
        without them when it opens, and answer as before."""
        populate(call)
        engine = call.service.engine
        before = snapshot(engine.conn)
        engine.conn.execute("DROP TABLE artifact_fts")
        engine.conn.execute("CREATE VIRTUAL TABLE artifact_fts USING fts5(title, body, scope, "
                            "content='artifact_search_text', content_rowid='doc_id')")
        engine.conn.execute("INSERT INTO artifact_fts(artifact_fts) VALUES('rebuild')")
        engine.conn.execute("UPDATE projector_checkpoints SET version = 5 WHERE name = 'fts'")
        call.service.close()
        reopened = Engine(call.service.data_dir)
        names = {row[0] for row in reopened.conn.execute("SELECT name FROM sqlite_master")}
        assert not {"artifact_fts_docsize", "claim_fts_docsize"} & names
        assert before == snapshot(reopened.conn)
        reopened.close()

    def test_reindex_reproduces_the_fts_rows(self, call: Caller) -> None:
        """Dropping and replaying the fts projection yields identical rows and index answers."""
        populate(call)
        engine = call.service.engine
        before = snapshot(engine.conn)
        assert before["tables"]["artifact_chunks"] and before["answers"][("artifact_fts", "cache")]
        engine.reindex(["fts"])
        assert before == snapshot(engine.conn)
        engine.reindex()
        assert before == snapshot(engine.conn)
        for index in FTS_INDEXES:
            engine.conn.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")


def vocabulary(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("search_terms", "search_term_deletions", "search_scope_docs")}


def check_indexes(conn: Any) -> None:
    for index in FTS_INDEXES:
        conn.execute(f"INSERT INTO {index}({index}, rank) VALUES('integrity-check', 1)")  # raises when off


def found(call: Caller, query: str) -> set[str]:
    """Artifacts that qualify for ``query`` (unqualified look-alikes are left out)."""
    hits = call.ok("search", {"query": query})["result"]["hits"]
    return {hit["entity_id"] for hit in hits if hit["ranking"]["qualified"]}


def titles_indexed(conn: Any, word: str) -> int:
    return conn.execute("SELECT count(*) FROM artifact_fts WHERE artifact_fts MATCH ?", (f"title:{word}",)).fetchone()[0]


class TestGroupedIndexing:
    """Engine.group: several mutations in one transaction, their text indexed once at the end."""

    def test_a_group_indexes_what_one_by_one_writes_would(self, call: Caller, tmp_path: Any) -> None:
        """Puts, a revision and claims written in one group give the same index answers as the same
        requests written one by one, and FTS5's content check passes."""
        from memoree.service.service import Service

        def write(caller: Caller) -> None:
            art = put(caller, "The cache layer uses SQLite with WAL.")
            caller.ok("artifact.revise", {"artifact_id": art["artifact_id"], "if_revision": art["revision_id"],
                                          "content": {"type": "text", "data": "v2 of the cache notes " * 300}},
                      key="rev")
            caller.ok("claim.assert", {"claim_type": "decision", "statement": "Use WAL mode for abc"}, key="c1")
            put(caller, "chunk of abc text about sqlite " * 200, title="use the cache")

        single = Caller(Service(tmp_path / "one-by-one"))
        write(single)
        with call.service.engine.group():
            write(call)
        check_indexes(call.service.engine.conn)
        assert index_answers(call.service.engine.conn) == index_answers(single.service.engine.conn)
        assert vocabulary(call.service.engine.conn) == vocabulary(single.service.engine.conn)
        single.service.close()

    def test_grouped_requests_answer_and_store_byte_for_byte_what_lone_ones_do(self, tmp_path: Any) -> None:
        """The same requests (varied ASCII and accented texts, a repeated key, a failing revise,
        a claim, a purge) sent in groups of four and one by one, with the same clock and ids,
        get byte-identical answers and leave identical projection tables; a replay of the grouped
        store (verify) rebuilds the same rows."""
        import itertools
        import json

        from memoree.admin.verify import verify
        from memoree.service.service import Service

        def open_store(name: str) -> Service:
            ticks, ids = itertools.count(), itertools.count()
            return Service(tmp_path / name, clock=lambda: f"2026-01-01T00:00:{next(ticks) % 60:02d}.000000Z",
                           id_factory=lambda prefix: f"{prefix}_{next(ids):026d}")

        def frame(i: int, op: str, inp: dict[str, Any], key: str | None = None) -> bytes:
            return json.dumps({"v": 1, "request_id": f"r{i}", "op": op, "idempotency_key": key or f"k{i}",
                               "context": CTX, "input": inp}).encode()

        texts = [f"Note {i}: the cache_layer uses SQLite-WAL, tkt-{i:05d}; café Straße naïve {i}" if i % 3 == 0
                 else f"Plain ascii words number {i} about wombats, numbats & quokkas; see x_y_{i}."
                 for i in range(14)]
        frames = [frame(i, "artifact.put", {"kind": "note", "title": f"t{i}", "content": {"type": "text", "data": t}})
                  for i, t in enumerate(texts)]
        frames.insert(5, frames[2])  # a replay of an earlier key
        frames.insert(7, frame(90, "artifact.revise", {"artifact_id": "art_missing", "if_revision": "arev_x",
                                                       "content": {"type": "text", "data": "fails"}}))
        frames.append(frame(91, "claim.assert", {"claim_type": "fact", "statement": "Wombats use WAL"}))

        lone, grouped = open_store("lone"), open_store("grouped")
        lone_answers = [lone.handle_bytes(raw).body for raw in frames]
        grouped_answers = []
        for start in range(0, len(frames), 4):
            with grouped.engine.group():
                grouped_answers += [grouped.handle_bytes(raw).body for raw in frames[start:start + 4]]
        first_id = json.loads(lone_answers[0])["result"]["artifact_id"]
        last = [frame(92, "artifact.purge", {"artifact_id": first_id, "reason": "erasure"}), frames[1]]
        lone_answers += [lone.handle_bytes(raw).body for raw in last]
        with grouped.engine.group():
            grouped_answers += [grouped.handle_bytes(raw).body for raw in last]
        assert grouped_answers == lone_answers
        assert b'"ok":false' in lone_answers[7] and b'"ok":true' in lone_answers[-2]
        tables = [name for (name,) in lone.engine.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%fts%' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        for table in tables:
            assert (grouped.engine.conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
                    == lone.engine.conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()), table
        assert index_answers(grouped.engine.conn) == index_answers(lone.engine.conn)
        report = verify(grouped.engine)
        assert report["ok"], report["issues"]
        lone.close()
        grouped.close()

    def test_a_group_with_purges_leaves_the_vocabulary_one_by_one_writes_would(self, call: Caller,
                                                                              tmp_path: Any) -> None:
        """The vocabulary a group adds at its end (words of two scopes, one body purged in the
        group, one purged body written before it) equals the one of the same requests one by one."""
        from memoree.service.service import Service

        other = {**CTX, "project_id": "prj_other"}

        def before(caller: Caller) -> dict[str, Any]:
            return caller.put_text("earlier quokka words shared", key="early")

        def write(caller: Caller, early: dict[str, Any]) -> None:
            doomed = caller.put_text("doomed wallaby words shared", key="doomed")
            caller.put_text("other project quokka words", key="other", context=other)
            caller.put_text("kept bilby words", key="kept")
            for artifact in (early, doomed):
                caller.ok("artifact.purge", {"artifact_id": artifact["artifact_id"], "reason": "erasure"},
                          key=f"purge-{artifact['artifact_id']}")

        single = Caller(Service(tmp_path / "one-by-one"))
        write(single, before(single))
        early = before(call)
        with call.service.engine.group():
            write(call, early)
        words = vocabulary(call.service.engine.conn)
        assert words == vocabulary(single.service.engine.conn)
        assert not {"wallaby", "earlier"} & {term for _, term in words["search_terms"]}
        single.service.close()

    def test_a_request_rolled_back_inside_a_group_leaves_no_index_entries(self, call: Caller) -> None:
        """A unit rolled back to its savepoint takes its text and words with it (the next unit
        reuses its document id); the rest of the group is indexed."""
        engine = call.service.engine
        with engine.group():
            kept = put(call, "kept wombat note")
            try:
                with engine.log.transaction():
                    put(call, "discarded numbat note")
                    raise RuntimeError("this unit fails after writing")
            except RuntimeError:
                pass
            later = put(call, "later wombat note")
        assert {kept["artifact_id"], later["artifact_id"]} == found(call, "wombat")
        assert set() == found(call, "numbat")
        terms = {term for _, term in vocabulary(engine.conn)["search_terms"]}
        assert ("numbat" not in terms, "later" in terms) == (True, True)
        check_indexes(engine.conn)

    def test_a_purge_in_the_same_group_as_puts(self, call: Caller) -> None:
        """Purging an artifact written earlier and one written in the same group leaves neither body
        searchable, both titles searchable, and the indexes consistent."""
        old = put(call, "old secret platypus text", title="old record")
        with call.service.engine.group():
            new = put(call, "new secret platypus text", title="new record")
            for artifact in (old, new):
                call.ok("artifact.purge", {"artifact_id": artifact["artifact_id"], "reason": "erasure"},
                        key=f"purge-{artifact['artifact_id']}")
        conn = call.service.engine.conn
        assert set() == found(call, "platypus")
        assert 0 == conn.execute("SELECT count(*) FROM artifact_fts WHERE artifact_fts MATCH 'platypus'").fetchone()[0]
        assert 2 == titles_indexed(conn, "record")  # titles live in the log and stay searchable
        check_indexes(conn)

    def test_a_failed_group_indexes_and_commits_nothing(self, call: Caller) -> None:
        """When the group's block raises, the transaction rolls back and nothing is indexed."""
        engine = call.service.engine
        head = engine.head()
        try:
            with engine.group():
                put(call, "never committed echidna")
                raise RuntimeError("the group fails")
        except RuntimeError:
            pass
        assert (head, set()) == (engine.head(), found(call, "echidna"))
        check_indexes(engine.conn)


class TestVocabularyScopes:
    """Every scope's vocabulary holds exactly the words of the texts it owns."""

    def test_words_known_elsewhere_still_reach_each_new_scope(self, call: Caller) -> None:
        """A word first put in a task, then in the project without a task, another project and
        another workspace, gets its rows in each scope it reaches, singly or in a group, as a
        replay builds them."""
        from memoree.projections.fts_vocab import owner_scope_tokens, words_of

        contexts = [{"workspace_id": "wsp_a", "project_id": "prj_a", "task_id": "tsk_1"},
                    {"workspace_id": "wsp_a", "project_id": "prj_a"},
                    {"workspace_id": "wsp_a", "project_id": "prj_a", "task_id": "tsk_2"},
                    {"workspace_id": "wsp_a", "project_id": "prj_b"},
                    {"workspace_id": "wsp_b", "project_id": "prj_a"}]
        texts = ["wombat quokka", "wombat numbat", "quokka bilby", "wombat bilby numbat", "bilby"]
        engine = call.service.engine
        for i, (context, text) in enumerate(zip(contexts, texts)):
            call.put_text(text, key=f"one{i}", context=context)
        with engine.group():  # the same texts again, in reverse, in one group
            for i, (context, text) in enumerate(zip(contexts[::-1], texts)):
                call.put_text(text + " kowari", key=f"group{i}", context=context)
        engine.handler.run_deferred()
        expected: set[tuple[str, str]] = set()
        for context, text in [*zip(contexts, texts), *zip(contexts[::-1], [t + " kowari" for t in texts])]:
            tokens = owner_scope_tokens(context["workspace_id"], context["project_id"], context.get("task_id"))
            expected |= {(scope, word) for scope in ("", *tokens) for word in words_of("note\n" + text)}
        rows = vocabulary(engine.conn)
        assert set(rows["search_terms"]) == expected
        engine.reindex(["fts"])
        assert vocabulary(engine.conn) == rows


class TestVocabularyAfterPurge:
    """A purge leaves the vocabulary and the BM25 lengths as a replay of the log builds them."""

    def test_purged_words_leave_their_scopes_unless_another_text_there_holds_them(self, call: Caller) -> None:
        """Words only the purged body held are gone everywhere; shared ones stay where shared."""
        from memoree.projections.fts_vocab import owner_scope_tokens

        other = {"workspace_id": "wsp_test", "project_id": "prj_other"}
        gone = call.put_text("zebracanary shared words", key="gone")
        call.put_text("shared words elsewhere", key="kept", context=other)
        call.ok("artifact.purge", {"artifact_id": gone["artifact_id"], "reason": "erasure"}, key="purge")
        conn = call.service.engine.conn
        mine = owner_scope_tokens("wsp_test", "prj_test", None)
        terms = set(conn.execute("SELECT scope, term FROM search_terms").fetchall())
        assert not any(term == "zebracanary" for _, term in terms)
        assert ("", "shared") in terms and (owner_scope_tokens(**other, task_id=None)[1], "shared") in terms
        assert (mine[1], "shared") not in terms
        assert not conn.execute("SELECT 1 FROM search_term_deletions WHERE term = 'zebracanary'").fetchone()


def test_one_pass_over_a_text_gives_its_vocabulary_and_its_length() -> None:
    """``words_and_count`` equals ``words_of`` and ``word_count`` for ASCII, accented, mixed-case
    and underscore-joined text, and a title and body joined by a newline count as the two apart."""
    from memoree.projections.fts_vocab import word_count, words_and_count, words_of

    texts = ["Cache NOTES: the WAL, the wal and x_y_z ab abc", "Ünïcode Straße café_bar ÀBC Ǆemal", "",
             "ß" * 40, "tkt-00123 with 2024-01-01 dates"]
    for text in texts:
        assert words_and_count(text) == (words_of(text), word_count(text)), text
        assert words_and_count("Title words\n" + text)[1] == word_count("Title words") + word_count(text)
    assert words_of("Cache NOTES") == {"cache", "notes"} and words_of("Ünïcode") == {"unicode"}


def test_ascii_text_is_split_into_the_same_words_as_the_word_pattern_finds() -> None:
    """For ASCII text the fast split (every byte but a letter or digit made a space) yields the
    word pattern's words in order, over random strings of every ASCII character, underscores,
    digits, punctuation and control characters included; so vocabularies and lengths are the
    pattern's."""
    import random

    from memoree.projections.fts_vocab import _WORD, _ascii_words, word_count, words_of

    rng = random.Random(19)
    every_ascii = "".join(chr(code) for code in range(128))
    for _ in range(5000):
        text = "".join(rng.choice(every_ascii if rng.random() < 0.3 else "aZ9_ -.\t\n")
                       for _ in range(rng.randint(0, 60)))
        assert _ascii_words(text) == _WORD.findall(text), repr(text)
        assert word_count(text) == len(_WORD.findall(text))
        assert words_of(text) == {w for w in _WORD.findall(text.lower()) if 3 <= len(w) <= 32}


def test_a_deletion_look_up_finds_exactly_the_words_whose_deletions_hold_the_key() -> None:
    """Stored in two forms (as they are, and reversed behind a marker), deletion keys answer a
    look-up of every deletion string with the words one deletion away, and nothing else."""
    from memoree.projections.fts_vocab import deletion_lookup_keys, deletions, stored_deletion_keys

    words = ["cache", "caches", "cachet", "ache", "abba", "abab", "aaaa", "ünïcode", "x1x1x1", "zebra"]
    rows = {(key, word) for word in words for key in stored_deletion_keys(word)}
    for key in {d for word in words for d in deletions(word)} | set(words):
        asked = set(deletion_lookup_keys([key]))
        assert {w for k, w in rows if k in asked} == {w for w in words if key in deletions(w)}, key


def test_a_new_words_deletion_keys_share_one_of_two_prefixes() -> None:
    """Each stored key starts with the word's first half, or (reversed) with its second half
    reversed, so a word's rows sit on about two b-tree leaves."""
    from memoree.projections.fts_vocab import REVERSED_KEY, stored_deletion_keys

    word = "retrieval"
    keys = stored_deletion_keys(word)
    forward = {k for k in keys if not k.startswith(REVERSED_KEY)}
    backward = keys - forward
    assert forward and backward
    assert all(k.startswith(word[:len(word) // 2]) for k in forward)
    assert all(k.startswith(REVERSED_KEY + word[len(word) // 2:][::-1]) for k in backward)
