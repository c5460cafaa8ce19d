"""Passage-level evidence: lines and sentences with exact spans, the hit window, packing."""

from __future__ import annotations

from typing import Any

import pytest

from memoree.projections.chunker import span_citation
from memoree.projections.embedding import load_model
from memoree.queries.analysis import analyze_query
from memoree.queries.memo import DigestMemo
from memoree.queries import context_build, passages
from memoree.queries.context_build import (
    OTHER_SPEAKER_SHARE,
    REPLY_SHARE,
    TITLE_SHARE,
    candidate_line_idf,
    line_factor,
    line_similarities,
    line_speaker,
    named_speakers,
    rescored,
    with_context,
)
from memoree.queries.passages import (
    HIT_WINDOW_BYTES,
    MAX_PASSAGE_BYTES,
    Passage,
    PassageScorer,
    passage_spans,
    score_passages,
)
from tests.conftest import Caller
from tests.queries.test_search import claim, content_bytes, put, search

TURNS = "".join(f"[D1:{i}] Ann: filler talk about the weather number {i}\n" for i in range(60))
NEEDLE = "[D1:60] Bob: the lighthouse keeper painted the boat orange\n"
REPLY = "[D1:61] Ann: what a lovely colour\n"


class TestPassageSpans:
    """Passages are lines; long lines are cut at sentences, then whitespace, on code points."""

    def test_lines_become_passages_without_their_newline(self) -> None:
        """Each non-blank line is one span, exact in bytes."""
        data = b"first line\n\nsecond line\n"
        assert [(0, 10), (12, 23)] == passage_spans(data, 0, len(data))

    def test_a_long_line_is_cut_at_sentence_ends_within_the_size_cap(self) -> None:
        """No piece exceeds the cap; pieces tile the line; cuts follow sentence punctuation."""
        line = ("Sentence number one is here. " * 60).encode()
        spans = passage_spans(line, 0, len(line))
        assert all(end - start <= MAX_PASSAGE_BYTES for start, end in spans)
        assert spans[0][0] == 0 and spans[-1][1] == len(line)
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert all(line[end - 2:end] == b". " for _, end in spans[:-1])

    def test_a_long_word_of_multibyte_characters_is_cut_on_code_points(self) -> None:
        """A line without spaces is cut at character boundaries."""
        line = ("日本語" * 400).encode()
        for start, end in passage_spans(line, 0, len(line)):
            line[start:end].decode("utf-8")


class TestScoring:
    """Passages are scored like BM25 over the query units, so rarer and repeated units weigh more."""

    def test_matched_units_and_rarer_units_score_higher(self) -> None:
        """A line with the rare unit outscores one with the common unit; no unit, no score."""
        analysis = analyze_query("lighthouse weather")
        scorer = PassageScorer(analysis, [3.0, 0.2])
        rare, _ = scorer.score(NEEDLE)
        common, units = scorer.score("[D1:2] Ann: filler talk about the weather")
        assert rare > common > 0 and units == frozenset({1})
        assert (0.0, frozenset()) == scorer.score("nothing relevant")

    def test_inflections_and_phrases_are_counted_as_the_index_counts_them(self) -> None:
        """Inflection variants and hyphenated phrases match across case and punctuation."""
        analysis = analyze_query("painting cold-start")
        scorer = PassageScorer(analysis, [1.0, 1.0])
        assert frozenset({0, 1}) == scorer.score("She PAINTED it; the Cold Start was slow")[1]

    def test_a_title_adds_half_the_score_of_the_units_only_it_holds(self) -> None:
        """A line read under its title gains TITLE_SHARE of what the title's other units score at
        the line's length; units the line holds itself are not counted twice."""
        scorer = PassageScorer(analyze_query("pottery class july"), [2.0, 1.0, 3.0])
        counts, words = scorer.counts("Ann: the pottery class was fun")
        line = Passage(0, 30, "Ann: the pottery class was fun", scorer.bm25(counts, words),
                       frozenset(counts), words, tuple(sorted(counts.items())))
        title = scorer.counts("Session 4: 3 July, Ann and Bob, pottery")[0]
        gain = rescored(scorer.idf, line, title).score - line.score
        assert abs(gain - TITLE_SHARE * scorer.bm25({2: 1}, words)) < 1e-9
        assert line.score == rescored(scorer.idf, line, scorer.counts("Pottery class notes")[0]).score

    def test_a_unit_in_every_candidate_line_weighs_less_than_a_rare_one(self) -> None:
        """Line weights are the geometric mean of the horizon IDF and the IDF among candidate
        lines: equal horizon IDF, the unit said in every line weighs less; no horizon IDF, none."""
        scorer = PassageScorer(analyze_query("ann pottery kiln"), [1.0, 1.0, 0.0])
        lines = [Passage(0, 1, "x", 1.0, frozenset({0})) for _ in range(9)]
        lines.append(Passage(2, 3, "y", 1.0, frozenset({0, 1, 2})))
        everywhere, rare, unweighted = candidate_line_idf(scorer, {"rev": lines})
        assert 0 < everywhere < rare and unweighted == 0.0

    def test_neighbours_of_a_match_compete_at_half_its_score(self) -> None:
        """A line next to a matching one becomes a candidate at half the score; others do not."""
        lines = [Passage(0, 10, "a", 0.0, frozenset()), Passage(11, 20, "b", 4.0, frozenset({0})),
                 Passage(21, 30, "c", 0.0, frozenset()), Passage(31, 40, "d", 0.0, frozenset())]
        assert [(4.0, lines[1]), (2.0, lines[0]), (2.0, lines[2])] == sorted(
            with_context(lines), key=lambda pair: (-pair[0], pair[1].start))

    def test_a_matching_line_after_a_stronger_one_scores_at_least_its_reply_share(self) -> None:
        """The answer after a question that holds the query's words rises to REPLY_SHARE of the
        question's score; a line before it, or one stronger already, keeps its own score."""
        lines = [Passage(0, 10, "a", 0.5, frozenset({0})), Passage(11, 20, "b", 10.0, frozenset({0, 1})),
                 Passage(21, 30, "c", 0.5, frozenset({0})), Passage(31, 40, "d", 9.0, frozenset({0}))]
        scores = dict((p.start, score) for score, p in with_context(lines))
        assert scores == {0: 0.5, 11: 10.0, 21: REPLY_SHARE * 10.0, 31: 9.0}


class TestSpeakers:
    """Transcript lines: the speaker a query names, and whose line is whose."""

    def test_a_transcript_line_has_a_speaker_and_what_they_say(self) -> None:
        """An optional bracketed label, a name and a colon; other lines have no speaker."""
        assert ("Caroline", "I went to a support group") == line_speaker("[D1:3] Caroline: I went to a support group")
        assert ("Dr. Lee", "take two") == line_speaker("Dr. Lee: take two")
        assert (None, "just a sentence, no speaker") == line_speaker("just a sentence, no speaker")
        assert (None, "12:30 lunch") == line_speaker("12:30 lunch")

    def test_the_named_speakers_are_those_whose_label_holds_a_query_unit(self) -> None:
        """A name said in a line's body does not make its speaker named."""
        scorer = PassageScorer(analyze_query("What has Melanie painted?"), [1.0, 1.0])
        texts = ["[D1:1] Caroline: Thanks, Melanie! Is that your painting?", "[D1:2] Melanie: Yes, a lake"]
        speakers = {line_speaker(text)[0] for text in texts}
        assert frozenset({"Melanie"}) == named_speakers(scorer, speakers)
        assert frozenset() == named_speakers(scorer, {"Caroline"})

    def test_another_speakers_line_counts_at_its_share_and_meaning_raises_a_line(self) -> None:
        """With named speakers, a line someone else says is scaled by OTHER_SPEAKER_SHARE (a line
        without a speaker, or with no speaker named, is not); a cosine c multiplies by 1 + 2c."""
        named = frozenset({"Melanie"})
        assert OTHER_SPEAKER_SHARE == line_factor("Caroline", named, 0.0)
        assert 1.0 == line_factor("Melanie", named, 0.0) == line_factor(None, named, 0.0)
        assert 1.0 == line_factor("Caroline", frozenset(), 0.0)
        assert 1.5 == line_factor("Melanie", named, 0.25)

    def test_meaning_is_measured_only_with_the_dense_channel_ready(self) -> None:
        """The line about painting is nearer a painting question than one about trains; with the
        channel not ready nothing is embedded."""
        said = ["I painted a picture of the boat", "the train to the city was late again"]
        if load_model() is None:
            pytest.skip("the embedding model is not installed here")
        painting, train = line_similarities(True, "What did Ann paint?", said)
        assert painting > train >= 0.0
        assert [] == line_similarities(False, "What did Ann paint?", said)

    def test_remembered_line_vectors_give_what_a_fresh_batch_gives(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Lines embedded by an earlier request (and lines new to this one) score exactly as one
        fresh batch of the query and lines would; a full memory is cleared, not grown."""
        model = load_model()
        if model is None:
            pytest.skip("the embedding model is not installed here")
        monkeypatch.setattr(context_build, "_LINE_VECTORS", DigestMemo(4))
        query = "What did Ann paint?"

        def fresh(said: list[str]) -> list[float]:
            vectors = model.embed([query, *said])
            return [max(0.0, round(c, 6)) for c in (vectors[1:] @ vectors[0]).tolist()]

        first = ["I painted a picture of the boat", "the train to the city was late again"]
        assert fresh(first) == line_similarities(True, query, first)
        again = [first[1], "Ann loves pottery", first[0], first[0]]
        assert fresh(again) == line_similarities(True, query, again)
        assert len(context_build._LINE_VECTORS) <= 4 + len(again)


class TestEvidence:
    """Hits cite the matching passage, and context.build shows it with its exact span."""

    def store(self, call: Caller) -> dict[str, Any]:
        return put(call, "# Session 1\n\n" + TURNS + NEEDLE + REPLY, title="Session 1")

    def test_an_artifact_hit_cites_the_matching_lines_not_the_chunk_head(self, call: Caller) -> None:
        """The excerpt holds the matching line, is at most 1 KiB, and is exactly the cited bytes."""
        source = self.store(call)
        hit = search(call, "lighthouse keeper")["hits"][0]
        start, end = map(int, hit["citation"].rsplit("#", 1)[1].split("-"))
        body = content_bytes(call, source["artifact_id"], source["revision_id"])
        assert NEEDLE.strip() in hit["excerpt"] and end - start <= HIT_WINDOW_BYTES
        assert body[start:end].decode() == hit["excerpt"]
        assert hit["provenance"]["retrieval_span"] == {
            "start_byte": start, "end_byte": end, "chunker_version": 1,
            "coordinate_space": "immutable_artifact_bytes"}

    def test_context_build_shows_the_matching_passage_and_its_neighbours(self, call: Caller) -> None:
        """Within a small budget: the matching line and the lines around it, as one excerpt
        with its exact span (the lines follow one another)."""
        source = self.store(call)
        result = call.ok("context.build", {"query": "lighthouse keeper", "max_bytes": 700})["result"]
        body = content_bytes(call, source["artifact_id"], source["revision_id"])
        item = result["manifest"][0]
        shown = [body[p["start_byte"]:p["end_byte"]].decode() for p in item["passages"]]
        before = "[D1:59] Ann: filler talk about the weather number 59"
        assert ["\n".join([before, NEEDLE.strip(), REPLY.strip()])] == shown
        for passage in item["passages"]:
            assert passage["citation"] == span_citation(source["artifact_id"], source["revision_id"],
                                                        (passage["start_byte"], passage["end_byte"]))
            assert f"Excerpt `#{passage['start_byte']}-{passage['end_byte']}`:\n" in result["rendered_markdown"]
        assert 1 == result["rendered_markdown"].count("filler talk")

    def test_a_line_under_a_title_naming_the_asked_date_comes_first(self, call: Caller) -> None:
        """Two sessions with the same matching line: the one whose title names the question's
        month is shown first, ahead of a line that repeats the words but is from another month."""
        may = put(call, "# Session 1\n\n[D1:1] Ann: the pottery class, the pottery class again\n",
                  title="Session 1: 9 May, Ann and Bob")
        july = put(call, "# Session 2\n\n[D2:1] Ann: the pottery class was fun\n",
                   title="Session 2: 3 July, Ann and Bob")
        put(call, "# Session 3\n\n[D3:1] Bob: nothing about it\n", title="Session 3: 4 July, Ann and Bob")
        result = call.ok("context.build", {"query": "pottery class in July", "max_bytes": 2000})["result"]
        shown = [item["entity_id"] for item in result["manifest"] if item["passages"]]
        assert [july["artifact_id"], may["artifact_id"]] == shown[:2]

    def test_the_named_speakers_answer_comes_before_the_question_put_to_them(self, call: Caller) -> None:
        """Asked what Ann painted (the dense channel on), the budget for one line goes to Ann's
        own line, not to Bob's question that names her and repeats the query's words."""
        if load_model() is None:
            pytest.skip("the embedding model is not installed here")
        put(call, "# Session 1\n\n[D1:1] Bob: Ann, what did you paint at the lighthouse?\n"
                  "[D1:2] Ann: I painted the lighthouse at dusk, in watercolour\n" + TURNS, title="Session 1")
        result = call.ok("context.build", {"query": "What did Ann paint at the lighthouse?",
                                           "max_bytes": 440})["result"]
        assert "ready" == result["semantic"]["state"]
        assert "[D1:2] Ann: I painted the lighthouse at dusk, in watercolour" in result["rendered_markdown"]
        assert "[D1:1] Bob" not in result["rendered_markdown"]

    def test_a_claims_evidence_passage_is_shown_once(self, call: Caller) -> None:
        """A claim brings its evidence line's text; its artifact does not repeat that line."""
        source = self.store(call)
        start = len(("# Session 1\n\n" + TURNS).encode())
        claim(call, "The lighthouse keeper painted the boat orange", evidence=[{
            "artifact_id": source["artifact_id"], "revision_id": source["revision_id"],
            "start_byte": start, "end_byte": start + len(NEEDLE.strip().encode())}])
        result = call.ok("context.build", {"query": "lighthouse keeper boat", "max_bytes": 4000})["result"]
        markdown = result["rendered_markdown"]
        assert 1 == markdown.count(NEEDLE.strip())
        cited = span_citation(source["artifact_id"], source["revision_id"],
                              (start, start + len(NEEDLE.strip().encode())))
        assert f"Evidence `{cited}`:\n> {NEEDLE.strip()}\n" in markdown
        assert 0 == result["omitted_count"]

    def test_a_claim_restating_a_shown_line_waits_for_the_other_evidence(self, call: Caller) -> None:
        """A claim whose evidence line is already shown adds no evidence: it is placed after
        every other item that fits (here another artifact's line, which scores below the claim),
        and still comes, with its evidence, when the budget has room left."""
        source = self.store(call)
        start = len(("# Session 1\n\n" + TURNS).encode())
        claim(call, "The lighthouse keeper's boat is orange", evidence=[{
            "artifact_id": source["artifact_id"], "revision_id": source["revision_id"],
            "start_byte": start, "end_byte": start + len(NEEDLE.strip().encode())}])
        for number in range(20):  # other claims, so that this one's words are rare among claims
            claim(call, f"weather note number {number}")
        notes = put(call, "# Notes\n\nthe keeper talked for a long while about the tides, the gulls, the nets, "
                          "the harbour and the weather, and the colour orange\n", title="Notes")
        result = call.ok("context.build", {"query": "lighthouse keeper painted the boat orange",
                                           "max_bytes": 6000})["result"]
        kinds = [(item["entity_type"], item["entity_id"]) for item in result["manifest"]]
        assert [("artifact", source["artifact_id"]), ("artifact", notes["artifact_id"])] == kinds[:2]
        assert "claim" == kinds[2][0] and 3 == len(kinds) and 0 == result["omitted_count"]
        markdown = result["rendered_markdown"]
        assert markdown.index("the colour orange") < markdown.index("## Retrieved claim")
        assert 1 == markdown.count(NEEDLE.strip())


class TestLinedPassages:
    """A chunk's lines are cut and folded once per process; scoring them is unchanged."""

    def test_remembered_lines_score_as_freshly_cut_ones(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Scoring the same bytes twice, and other bytes between, gives each line the score
        ``PassageScorer.score`` gives its text; a full memory is cleared, not grown."""
        monkeypatch.setattr(passages, "_LINED", DigestMemo(1))
        scorer = PassageScorer(analyze_query("lighthouse keeper boat"), [1.5, 2.0, 0.5])
        data = (TURNS + NEEDLE + REPLY + "Crème brûlée by the LIGHTHOUSE\n").encode()
        other = b"the keeper's boat\nnothing here\n"
        for chunk in (data, other, data):
            scored = score_passages(chunk, 0, len(chunk), scorer)
            spans = passage_spans(chunk, 0, len(chunk))
            assert [(p.start, p.end) for p in scored] == spans
            for passage in scored:
                assert passage.text == chunk[passage.start:passage.end].decode()
                assert (passage.score, passage.units) == scorer.score(passage.text)
            assert len(passages._LINED) == 1

    def test_chunk_counts_count_as_each_line_does(self) -> None:
        """``chunk_counts`` gives every line the units, counts (in the same insertion order, so
        sums add alike) and word count that ``folded_counts`` gives its folded words, for words,
        variants, corrections and phrases alike, and leaves out the lines that count nothing."""
        scorer = PassageScorer(analyze_query('keeper "the boat" lighthouses orange painted'),
                               [1.5, 2.0, 0.5, 0.7, 0.9], {0: ["keepr"]})
        data = (TURNS + NEEDLE + REPLY + "Orange boat, the boat! keeper keepr LIGHTHOUSE lighthouse\n"
                "painted painting the keeper\n").encode()
        chunk = passages.lined_chunk(data, 0, len(data))
        expected = [scorer.folded_counts(folded) for _, _, _, folded in chunk.lines]
        counted = scorer.chunk_counts(chunk)
        got = [(counted.get(line, {}), len(tokens)) for line, tokens in enumerate(chunk.tokens)]
        assert [(list(c.items()), w) for c, w in got] == [(list(c.items()), w) for c, w in expected]
        assert any(len(c) > 1 for c, _ in got) and all(counted.values())

    def test_a_line_without_units_is_the_blank_passage_fresh_scoring_makes(self) -> None:
        """The remembered blank passages equal those scoring makes for unmatched lines (score,
        units, counts), at every offset asked, and a chunk keeps a bounded number of offsets."""
        scorer = PassageScorer(analyze_query("lighthouse"), [1.5])
        data = (TURNS + NEEDLE).encode()
        chunk = passages.lined_chunk(data, 0, len(data))
        for offset in range(passages.MAX_BLANK_OFFSETS + 2):
            scored = score_passages(data, 0, len(data), scorer, offset)
            for passage, (start, end, text, folded) in zip(scored, chunk.lines):
                counts, words = scorer.folded_counts(folded)
                assert (passage.start, passage.end, passage.text, passage.words) == (start + offset, end + offset, text, words)
                assert (passage.score, passage.units) == (scorer.bm25(counts, words), frozenset(counts))
                assert type(passage.score) is type(scorer.bm25(counts, words))
            assert len(chunk._blanks) <= passages.MAX_BLANK_OFFSETS


class TestSectionSize:
    """A bundle section's remembered excerpt size follows every change of its shown passages."""

    def test_growth_and_shrinkage_match_fresh_rendering_as_passages_come_and_go(self) -> None:
        """After each append and removal, growth and shrinkage equal the byte difference of the
        excerpts rendered from scratch (joined runs included)."""
        section = context_build._Section(None, 0, [])  # type: ignore[arg-type]
        lines = [Passage(0, 10, "a" * 10, 1.0, frozenset({0})), Passage(11, 20, "b" * 9, 1.0, frozenset({0})),
                 Passage(40, 50, "c" * 10, 1.0, frozenset({0}))]

        def size(shown: list[Passage]) -> int:
            return len(context_build.excerpts_text(shown).encode())

        for passage in lines:
            assert section.growth(passage) == size([*section.passages, passage]) - size(section.passages)
            section.passages.append(passage)
        for passage in list(section.passages):
            rest = [p for p in section.passages if p is not passage]
            assert section.shrinkage(passage) == size(section.passages) - size(rest)
            section.passages.remove(passage)
            assert section.excerpts_size() == size(section.passages)
