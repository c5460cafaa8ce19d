"""The LoCoMo evaluator: reading, loading through the protocol, the scoring rule, the baseline, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memoree.admin.locomo import evaluate_locomo, format_table, load_conversation, scratch_service
from memoree.admin.locomo_data import (
    LocomoError,
    Session,
    Turn,
    is_locomo_dir,
    normalize_dia_ids,
    read_conversation,
)
from memoree.admin.locomo_scoring import (
    Answer,
    Cited,
    TurnIndex,
    answer_from_result,
    baseline_expression,
    turn_found,
)
from memoree.cli.app import app
from memoree.admin.evaluation import Client

LONG = ("I finally repaired the old lighthouse lantern on Tuesday, and the beam now reaches "
        "the northern reef again, which the harbour pilots were very happy about.")


def conversation_document() -> dict[str, Any]:
    """Two sessions between Ann and Bo, with a photo, a short turn, a long one and bad ids."""
    return {
        "speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi   Bo!\nHow are you?"},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Great, I adopted a kitten named Pixel.",
             "blip_caption": "a photo of a grey kitten", "img_url": ["http://example.invalid/x.jpg"]},
            {"speaker": "Ann", "dia_id": "D1:3", "text": LONG},
        ],
        "session_2_date_time": "9:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Bo", "dia_id": "D2:1", "text": "Pixel learned to open the fridge door with her paw."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "That cat is a burglar."},
        ],
        "session_3_date_time": "a session with a date and no turns",
        "session_1_observation": {
            "Bo": [["Bo adopted a kitten called Pixel.", "D1:2"]],
            "Ann": [["Ann repaired the lighthouse lantern.", ["D1:3", "D9:9"]],
                    ["Ann greeted Bo and talked about the lantern.", "D1:1, D1:03"]],
        },
        "session_2_observation": {"Bo": [["Pixel opens the fridge.", "D:2:1"]],
                                  "Ann": [["An observation with no known turn.", "D7:1"]]},
        "session_1_summary": "not used",
        "qa": [
            {"question": "What is the name of Bo's kitten?", "answer": "Pixel", "evidence": ["D1:2"], "category": 4},
            {"question": "When did Ann repair the lighthouse lantern?", "answer": "May 2023",
             "evidence": ["D1:3"], "category": 2},
            {"question": "What can the kitten Pixel do with the fridge?", "answer": "open it",
             "evidence": ["D1:2; D2:01", "D"], "category": 1},
            {"question": "What did Bo say about the dog?", "adversarial_answer": "nothing",
             "evidence": [], "category": 5},
        ],
    }


def write_dataset(folder: Path, names: tuple[str, ...] = ("7",)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.json").write_text(json.dumps(conversation_document()), "utf-8")
    return folder


@pytest.fixture()
def conversation_file(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "dev") / "7.json"


class TestReading:
    """Conversation files become sessions, turns, observations and questions."""

    def test_dia_ids_are_normalised_and_unknown_ones_dropped(self) -> None:
        """Lists, comma/semicolon joined ids, a stray colon and leading zeros normalise; unknown ids drop."""
        known = ["D1:1", "D1:2", "D4:17", "D4:19", "D11:26", "D30:5"]
        assert normalize_dia_ids("D4:17, D4:19", known) == (("D4:17", "D4:19"), ())
        assert normalize_dia_ids(["D1:2; D1:1", "D:11:26", "D30:05"], known) == (
            ("D1:2", "D1:1", "D11:26", "D30:5"), ())
        assert normalize_dia_ids(["D", "D9:9", "D1:1", "D1:01"], known) == (("D1:1",), ("D", "D9:9"))
        assert normalize_dia_ids(None, known) == ((), ())

    def test_sessions_render_one_line_per_turn_with_exact_spans(self, conversation_file: Path) -> None:
        """Each session is a heading, a blank line and one line per turn; each span is its line's bytes."""
        conversation = read_conversation(conversation_file)
        assert sorted(conversation.sessions) == [1, 2]
        session = conversation.sessions[1]
        assert session.text.startswith("# Session 1: 1:56 pm on 8 May, 2023, Ann and Bo\n\n[D1:1] Ann: Hi Bo! How are you?\n")
        data = session.text.encode("utf-8")
        lines = [data[t.start:t.end].decode("utf-8") for t in session.turns]
        assert lines == ["[D1:1] Ann: Hi Bo! How are you?",
                         "[D1:2] Bo: Great, I adopted a kitten named Pixel. (shares a photo: a photo of a grey kitten)",
                         f"[D1:3] Ann: {LONG}"]

    def test_observations_and_questions_keep_only_known_turns(self, conversation_file: Path) -> None:
        """An observation without a known turn is dropped; a question keeps its known gold turns."""
        conversation = read_conversation(conversation_file)
        assert [(o.text, o.dia_ids) for o in conversation.observations] == [
            ("Bo adopted a kitten called Pixel.", ("D1:2",)),
            ("Ann repaired the lighthouse lantern.", ("D1:3",)),
            ("Ann greeted Bo and talked about the lantern.", ("D1:1", "D1:3")),
            ("Pixel opens the fridge.", ("D2:1",)),
        ]
        assert conversation.dropped_observation_ids == 2
        multi_hop = conversation.questions[2]
        assert (multi_hop.gold, multi_hop.dropped_evidence) == (("D1:2", "D2:1"), ("D",))

    def test_folders_are_recognised_and_bad_files_rejected(self, tmp_path: Path) -> None:
        """A folder of conversation files is LoCoMo; a Memoree corpus or a broken file is not."""
        dev = write_dataset(tmp_path / "dev")
        assert is_locomo_dir(dev)
        corpus = tmp_path / "corpus"
        corpus.mkdir()
        (corpus / "seed.jsonl").write_text("")
        assert not is_locomo_dir(corpus)
        (tmp_path / "bad").mkdir()
        (tmp_path / "bad" / "1.json").write_text(json.dumps({"qa": [], "session_1": []}))
        with pytest.raises(LocomoError, match="speaker_a"):
            read_conversation(tmp_path / "bad" / "1.json")
        document = conversation_document()
        document["session_2"].append("not a turn")
        (tmp_path / "bad" / "2.json").write_text(json.dumps(document))
        with pytest.raises(LocomoError, match="2.json: session 2: a turn is not an object"):
            read_conversation(tmp_path / "bad" / "2.json")
        document = conversation_document()
        document["qa"][0]["category"] = "four"
        (tmp_path / "bad" / "3.json").write_text(json.dumps(document))
        with pytest.raises(LocomoError, match="integer category"):
            read_conversation(tmp_path / "bad" / "3.json")


class TestLoading:
    """Loading goes through the protocol: artifacts per session, claims citing their turns exactly."""

    def test_claims_cite_the_exact_bytes_of_their_turns(self, conversation_file: Path) -> None:
        """Each stored observation's evidence fetches back exactly its turns' lines."""
        conversation = read_conversation(conversation_file)
        with scratch_service() as service:
            client = Client(service)
            assert load_conversation(client, conversation) == {"sessions": 2, "claims": 4, "turns": 5}
            turns = conversation.turns
            hits = client.ok("search", {"query": "greeted lantern", "limit": 10}, context=conversation.context)["hits"]
            claim = next(h for h in hits if h["entity_type"] == "claim")
            assert "greeted Bo" in claim["excerpt"]
            fetched = []
            for locator in claim["provenance"]["evidence"]:
                citation = (f"memoree://artifact/{locator['artifact_id']}@{locator['revision_id']}"
                            f"#{locator['start_byte']}-{locator['end_byte']}")
                fetched.append(client.ok("citation.get", {"citation": citation},
                                         context=conversation.context)["content"])
            assert fetched == [turns["D1:1"].line, turns["D1:3"].line]
            other = {"workspace_id": "locomo", "project_id": "another"}
            assert client.ok("search", {"query": "lantern"}, context=other)["hits"] == []


def scoring_session() -> tuple[Session, Turn, Turn]:
    """A session whose turn ``short`` spans [100, 140) and ``long`` spans [140, 300)."""
    short = Turn("D1:1", 1, "Ann", "Hi Bo!", None, 100, 140)
    long = Turn("D1:2", 1, "Bo", LONG, None, 140, 300)
    return Session(1, "today", "x" * 4000, [short, long], "art", "rev1"), short, long


class TestScoring:
    """A gold turn is found by its text or by a citation that covers it, per the README rule."""

    def test_text_containment_uses_collapsed_whitespace_and_the_first_80_characters(self) -> None:
        """A long turn needs its first 80 characters (whitespace collapsed); a short one needs `Speaker: text`."""
        session, short, long = scoring_session()
        spaced = LONG[:80].replace(" ", " \n  ", 3)
        assert turn_found(Answer("> " + spaced + " trailing"), long, session)
        assert not turn_found(Answer(LONG[:79]), long, session)
        assert turn_found(Answer("quoted: Ann: Hi Bo! and more"), short, session)
        assert not turn_found(Answer("Hi Bo! said someone"), short, session)

    def test_citations_cover_by_half_overlap_or_by_lying_inside(self) -> None:
        """Half of the turn's bytes, or a span inside it, counts; less, or another revision, does not."""
        session, short, long = scoring_session()
        assert turn_found(Answer("", [Cited("rev1", 120, 160)]), short, session)   # 20 of 40 bytes
        assert not turn_found(Answer("", [Cited("rev1", 121, 160)]), short, session)  # 19 of 40
        assert turn_found(Answer("", [Cited("rev1", 150, 160)]), long, session)     # inside
        assert not turn_found(Answer("", [Cited("rev2", 100, 300)]), long, session)
        assert not turn_found(Answer("", [Cited("rev1", 0, 100)]), short, session)

    def test_wide_citations_count_only_with_the_turn_text(self) -> None:
        """Over 1,500 bytes (or a whole-revision citation) a citation alone does not find a turn."""
        session, short, long = scoring_session()
        assert turn_found(Answer("", [Cited("rev1", 0, 1500)]), long, session)
        assert not turn_found(Answer("", [Cited("rev1", 0, 1501)]), long, session)
        assert not turn_found(Answer("", [Cited("rev1")]), long, session)
        assert turn_found(Answer("Bo: " + LONG, [Cited("rev1", 0, 4000)]), long, session)
        small = Session(1, "today", "x" * 400, [short, long], "art", "rev1")
        assert turn_found(Answer("", [Cited("rev1")]), long, small)

    def test_citations_are_read_from_strings_and_locators_anywhere_in_a_result(self) -> None:
        """`memoree://artifact/…` strings and byte-span locators are citations; text comes from the text fields."""
        result = {"rendered_markdown": "Citation: `memoree://artifact/art@rev1#140-300`  \n> body",
                  "hits": [{"excerpt": "an excerpt", "citation": "memoree://claim/clm@crev",
                            "provenance": {"evidence": [{"artifact_id": "art", "revision_id": "rev2",
                                                         "start_byte": 1, "end_byte": 9}]}},
                           {"citation": "memoree://artifact/art@rev3", "title": "not text"}],
                  "presence": "claims"}
        answer = answer_from_result(result)
        assert answer.citations == [Cited("rev1", 140, 300), Cited("rev2", 1, 9), Cited("rev3")]
        assert answer.text == "Citation: `memoree://artifact/art@rev1#140-300`  \n> body\nan excerpt"
        assert answer.presence == "claims"


class TestBaseline:
    """The baseline ranks single turns with BM25 and packs whole lines into the byte budget."""

    def test_query_drops_stopwords_and_quotes_each_word(self) -> None:
        """Question words and function words go; the rest are quoted, deduplicated and OR-joined."""
        assert baseline_expression("When did Caroline go to the LGBTQ support group? Caroline!") == (
            '"caroline" OR "go" OR "lgbtq" OR "support" OR "group"')
        assert baseline_expression("What is it?") is None

    def test_lines_are_packed_in_rank_order_while_they_fit(self) -> None:
        """Each line costs its bytes plus a newline; a line that does not fit is skipped, later ones still fit."""
        turns = [Turn("D1:1", 1, "Ann", "kitten " * 40, None),
                 Turn("D1:2", 1, "Bo", "a kitten", None),
                 Turn("D1:3", 1, "Ann", "no match here", None)]
        index = TurnIndex(turns)
        try:
            assert [t.dia_id for t in index.ranked("kitten?")] == ["D1:1", "D1:2"]
            long_line, short_line = turns[0].line, turns[1].line
            assert index.pack("kitten", len(long_line) + 1) == long_line + "\n"
            assert index.pack("kitten", len(long_line)) == short_line + "\n"
            assert index.pack("kitten", len(long_line) + len(short_line) + 2) == f"{long_line}\n{short_line}\n"
            assert index.pack("kitten", len(short_line)) == ""
        finally:
            index.close()


class TestRun:
    """The whole run and the `memoree eval` command on a LoCoMo folder."""

    def test_evaluation_scores_every_op_and_the_baseline(self, tmp_path: Path) -> None:
        """Every answerable question is scored for each op; category 5 is report-only."""
        summary = evaluate_locomo(write_dataset(tmp_path / "dev"))
        assert summary["answerable_count"] == 3 and summary["category_5"]["n"] == 1
        rows = summary["questions"]
        assert set(rows[0]["found"]) == {"context.build@2000", "context.build@6000", "memory.recall",
                                         "search@10", "bm25@2000", "bm25@6000"}
        assert rows[0]["found"]["bm25@2000"] == ["D1:2"]
        assert "found" in rows[3] and rows[3]["found"] == {} and rows[3]["presence"] in {"none", "claims", "artifacts"}
        all_cb = summary["coverage"]["context.build@6000"]["all"]
        assert all_cb["n"] == 3 and all_cb["baseline"] == "bm25@6000"
        assert "context.build@2000 vs bm25@2000" in format_table(summary)

    def test_cli_reads_the_folder_and_writes_the_report(self, tmp_path: Path) -> None:
        """`memoree eval DIR --only 8 --report FILE --json` runs one conversation and writes one line per question."""
        dev = write_dataset(tmp_path / "dev", ("7", "8"))
        report = tmp_path / "out" / "report.jsonl"
        result = CliRunner().invoke(app, ["eval", str(dev), "--only", "8", "--questions", "3",
                                          "--report", str(report), "--json"])
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert summary["conversations"] == ["8"] and summary["question_count"] == 3
        rows = [json.loads(line) for line in report.read_text().splitlines()]
        assert [(r["conversation"], r["index"]) for r in rows] == [("8", 0), ("8", 1), ("8", 2)]
        assert {"question", "category", "gold", "found", "coverage", "returned", "latency_ms"} <= set(rows[0])
        assert 0 < rows[0]["returned"]["bm25@2000"]["text_bytes"] <= 2000
        table = CliRunner().invoke(app, ["eval", str(dev), "--only", "7"])
        assert table.exit_code == 0 and "| memory.recall vs bm25@2000 |" in table.stdout
        missing = CliRunner().invoke(app, ["eval", str(dev), "--only", "99"])
        assert missing.exit_code == 2 and "99.json" in missing.output
        corpus = tmp_path / "corpus"
        corpus.mkdir()
        (corpus / "seed.jsonl").write_text("")
        misplaced = CliRunner().invoke(app, ["eval", str(corpus), "--report", str(report)])
        assert misplaced.exit_code == 2 and "apply to LoCoMo folders" in misplaced.output


class TestBatchedLoading:
    def test_a_batched_load_stores_and_answers_what_one_request_per_mutation_does(
            self, conversation_file: Path, tmp_path: Path) -> None:
        """Loading a conversation in batch requests leaves the same rows as one request per
        mutation (same clock and ids), and a search answers the same; loading it again changes nothing."""
        from tests.admin.test_evaluation import OneByOneClient
        from tests.commands.test_bulk import open_store, tables

        stores = []
        for name, kind in (("lone", OneByOneClient), ("batched", Client)):
            service = open_store(tmp_path / name)
            loaded = load_conversation(kind(service), read_conversation(conversation_file))
            stores.append((service, loaded))
        (lone, lone_loaded), (batched, batched_loaded) = stores
        assert batched_loaded == lone_loaded == {"sessions": 2, "claims": 4, "turns": 5}
        assert tables(batched) == tables(lone)
        context = read_conversation(conversation_file).context
        ask = {"query": "greeted lantern", "limit": 10}
        assert Client(batched).ok("search", ask, context=context) == Client(lone).ok("search", ask, context=context)
        before = tables(batched)
        load_conversation(Client(batched), read_conversation(conversation_file))
        assert tables(batched) == before
        for service in (lone, batched):
            service.close()
