"""Tests for chunker v1, excerpt windows and the body-indexing text rules (§1.3, §5.7, §6.1)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoree.projections.chunker import (
    CHUNKER_VERSION,
    MAX_CHUNK_BYTES,
    MIN_TAIL_BYTES,
    TARGET_CHUNK_BYTES,
    Chunk,
    ExcerptWindow,
    chunk_body,
    chunk_spans,
    head_window,
    matched_window,
    pack_pieces,
    span_citation,
    split_oversized_block,
    structural_blocks,
    term_occurrences,
)
from memoree.projections.text import (
    body_index_text,
    ceil_char_boundary,
    floor_char_boundary,
    is_char_boundary,
    is_textual_media_type,
    truncate_utf8,
)


def texts_of(data: bytes, spans: list[tuple[int, int]]) -> list[bytes]:
    return [data[start:end] for start, end in spans]


def assert_exact_partition(data: bytes, spans: list[tuple[int, int]]) -> None:
    if not data:
        assert spans == []
        return
    assert spans[0][0] == 0
    assert spans[-1][1] == len(data)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end == start
    assert all(start < end for start, end in spans)
    assert b"".join(texts_of(data, spans)) == data


# Markdown-flavoured text: paragraphs, headings, fences, blank lines and multi-byte characters.
LINE = st.one_of(
    st.text(min_size=0, max_size=120).map(lambda text: text.replace("\n", " ")),
    st.sampled_from(["", "   ", "# Heading", "  ## Sub", "```", "~~~python", "> quote"]),
    st.text(alphabet="é漢😀ab .", min_size=200, max_size=1200),
)
DOCUMENT = st.lists(LINE, max_size=60).map("\n".join)
# Long bodies are built from repeated short segments so examples stay cheap to generate.
LONG_RUN = st.lists(
    st.tuples(st.text(alphabet="aé漢😀 .\n#`", min_size=1, max_size=40), st.integers(1, 300)),
    min_size=1,
    max_size=8,
).map(lambda parts: "".join(segment * count for segment, count in parts))


class TestTextualMediaTypes:
    @pytest.mark.parametrize(
        "media_type",
        [
            "text/plain",
            "text/plain; charset=utf-8",
            "Text/Markdown ; charset=UTF-8",
            "text/csv",
            "application/json",
            "APPLICATION/JSON",
            "application/xml",
            "application/yaml",
            "application/x-yaml",
            "application/toml",
            "application/javascript",
            "application/sql",
            "application/graphql",
            "application/ld+json",
            "application/vnd.api+json; charset=utf-8",
            "application/atom+xml",
            "image/svg+xml",
        ],
    )
    def test_textual_media_types(self, media_type: str) -> None:
        """text/*, *+json, *+xml and the listed application types are indexed."""
        assert is_textual_media_type(media_type)

    @pytest.mark.parametrize(
        "media_type",
        [
            "application/octet-stream",
            "application/pdf",
            "image/png",
            "image/svg",
            "application/x-toml",
            "application/jsonl",
            "audio/mpeg",
            "textplain",
            "",
            "application/json-seq",
        ],
    )
    def test_non_textual_media_types(self, media_type: str) -> None:
        """Everything else is title-searchable only."""
        assert not is_textual_media_type(media_type)

    def test_body_text_requires_valid_utf8(self) -> None:
        """Textual media types still index nothing when the bytes are not UTF-8."""
        assert body_index_text("text/plain", "héllo".encode()) == "héllo"
        assert body_index_text("text/plain", b"\xff\xfe bad") == ""

    def test_body_text_of_binary_media_type_is_empty(self) -> None:
        """A non-textual media type is never indexed, even for valid UTF-8 bytes."""
        assert body_index_text("application/octet-stream", b"plain ascii") == ""


class TestCharBoundaries:
    def test_boundary_predicate(self) -> None:
        """Offsets inside a multi-byte code point are not boundaries; both ends are."""
        data = "aé漢".encode()  # a | é(2) | 漢(3)
        assert [is_char_boundary(data, index) for index in range(len(data) + 2)] == [
            True, True, False, True, False, False, True, False,
        ]
        assert not is_char_boundary(data, -1)

    def test_floor_and_ceil(self) -> None:
        """Floor moves back and ceil moves forward to the nearest boundary, clamped."""
        data = "a漢b".encode()
        assert [floor_char_boundary(data, index) for index in range(6)] == [0, 1, 1, 1, 4, 5]
        assert [ceil_char_boundary(data, index) for index in range(6)] == [0, 1, 4, 4, 4, 5]
        assert floor_char_boundary(data, 99) == 5
        assert ceil_char_boundary(data, -3) == 0

    def test_truncate_utf8_never_splits_a_code_point(self) -> None:
        """Truncation cuts at the last boundary within the limit and reports the cut."""
        assert truncate_utf8("aé漢", 3) == ("aé", True)
        assert truncate_utf8("aé漢", 5) == ("aé", True)
        assert truncate_utf8("aé漢", 6) == ("aé漢", False)
        assert truncate_utf8("😀", 3) == ("", True)


class TestStructuralBlocks:
    def test_blank_line_ends_a_block_and_belongs_to_it(self) -> None:
        """Each paragraph keeps its trailing blank line."""
        data = b"one\ntwo\n\nthree\n"
        assert texts_of(data, structural_blocks(data)) == [b"one\ntwo\n\n", b"three\n"]

    def test_whitespace_only_line_counts_as_blank(self) -> None:
        """A line of spaces ends the block like an empty line."""
        data = b"one\n  \t\ntwo"
        assert texts_of(data, structural_blocks(data)) == [b"one\n  \t\n", b"two"]

    def test_heading_starts_a_new_block(self) -> None:
        """A `#` line (after leading whitespace) opens a block that runs on."""
        data = b"intro\n# Title\nbody\n  ## Sub\nmore"
        assert texts_of(data, structural_blocks(data)) == [
            b"intro\n",
            b"# Title\nbody\n",
            b"  ## Sub\nmore",
        ]

    def test_fence_opening_closes_the_preceding_block(self) -> None:
        """Text directly above a fence is its own block; the closing fence ends the fence."""
        data = b"before\n```py\nx = 1\n\n# not a heading\n```\nafter\n"
        assert texts_of(data, structural_blocks(data)) == [
            b"before\n",
            b"```py\nx = 1\n\n# not a heading\n```\n",
            b"after\n",
        ]

    def test_tilde_fence_is_not_closed_by_backticks(self) -> None:
        """A fence closes only on a fence line of its own marker."""
        data = b"~~~\n```\ninside\n~~~\nafter"
        assert texts_of(data, structural_blocks(data)) == [
            b"~~~\n```\ninside\n~~~\n",
            b"after",
        ]

    def test_unterminated_fence_runs_to_the_end(self) -> None:
        """A fence without a closing line swallows the rest of the body."""
        data = b"para\n```\ncode\n\nmore code\n"
        assert texts_of(data, structural_blocks(data)) == [b"para\n", b"```\ncode\n\nmore code\n"]

    def test_consecutive_blank_lines_form_their_own_blocks(self) -> None:
        """Blocks never lose bytes, even runs of blank lines."""
        data = b"a\n\n\n\nb"
        assert texts_of(data, structural_blocks(data)) == [b"a\n\n", b"\n", b"\n", b"b"]

    @given(DOCUMENT)
    def test_blocks_partition_the_body(self, text: str) -> None:
        """Structural blocks tile the body with no gaps or overlaps."""
        data = text.encode()
        assert_exact_partition(data, structural_blocks(data))


class TestOversizedBlocks:
    def test_prefers_a_blank_line(self) -> None:
        """Inside a fence (one block), the cut goes after the last `\\n\\n` in range."""
        data = b"```\n" + b"a" * 2500 + b"\n\n" + b"b" * 1000 + b"\n" + b"c" * 3000
        first, *_ = split_oversized_block(data, 0, len(data))
        assert first == (0, 4 + 2500 + 2)

    def test_then_prefers_a_newline(self) -> None:
        """Without a blank line, the last newline in range wins."""
        data = b"a" * 2100 + b"\n" + b"b" * 1500 + b"\n" + b"c" * 3000
        first, *_ = split_oversized_block(data, 0, len(data))
        assert first == (0, 2100 + 1 + 1500 + 1)

    def test_then_prefers_sentence_punctuation_before_whitespace(self) -> None:
        """Without newlines, the cut follows the last `.`/`!`/`?` that precedes whitespace."""
        data = b"w" * 2200 + b". " + b"x" * 300 + b" " + b"y" * 5000
        first, *_ = split_oversized_block(data, 0, len(data))
        assert first == (0, 2201)

    def test_then_cuts_before_whitespace(self) -> None:
        """Without sentence ends, the cut lands before the last whitespace in range."""
        data = b"w" * 2200 + b" " + b"x" * 300 + b"\t" + b"y" * 5000
        first, *_ = split_oversized_block(data, 0, len(data))
        assert first == (0, 2200 + 1 + 300)

    def test_boundaries_below_the_target_are_ignored(self) -> None:
        """A newline before 2 KiB is not used; the char-boundary ceiling is used instead."""
        data = b"a" * 100 + b"\n" + b"b" * 6000
        assert split_oversized_block(data, 0, len(data))[0] == (0, MAX_CHUNK_BYTES)

    def test_char_boundary_ceiling_never_splits_a_code_point(self) -> None:
        """With no boundary at all, the cut is the last code-point boundary ≤ 4 KiB."""
        data = "漢".encode() * 3000
        pieces = split_oversized_block(data, 0, len(data))
        assert pieces[0] == (0, 4095)
        assert all(is_char_boundary(data, end) for _, end in pieces)
        assert_exact_partition(data, pieces)

    def test_blocks_within_the_maximum_are_not_split(self) -> None:
        """A 4096-byte block stays whole."""
        data = b"z" * MAX_CHUNK_BYTES
        assert split_oversized_block(data, 0, len(data)) == [(0, MAX_CHUNK_BYTES)]

    @given(LONG_RUN.filter(lambda text: len(text.encode()) > MAX_CHUNK_BYTES))
    def test_every_cut_lies_between_target_and_maximum(self, text: str) -> None:
        """Each non-final piece is 2..4 KiB long and ends on a code-point boundary."""
        data = text.encode()
        pieces = split_oversized_block(data, 0, len(data))
        assert_exact_partition(data, pieces)
        for start, end in pieces[:-1]:
            assert TARGET_CHUNK_BYTES - 3 <= end - start <= MAX_CHUNK_BYTES
            assert is_char_boundary(data, end)
        assert pieces[-1][1] - pieces[-1][0] <= MAX_CHUNK_BYTES


class TestPacking:
    def test_small_blocks_merge_up_to_the_target(self) -> None:
        """Adjacent blocks merge while the merged span stays ≤ 2 KiB."""
        pieces = [(0, 1000), (1000, 2000), (2000, 2048), (2048, 3000)]
        assert pack_pieces(pieces) == [(0, 2048), (2048, 3000)]

    def test_tiny_chunk_absorbs_the_next_block_up_to_the_maximum(self) -> None:
        """A chunk under 256 B keeps merging while the result is ≤ 4 KiB."""
        assert pack_pieces([(0, 100), (100, 4096), (4096, 8000)]) == [(0, 4096), (4096, 8000)]
        assert pack_pieces([(0, 100), (100, 4097)]) == [(0, 100), (100, 4097)]

    def test_short_final_chunk_merges_into_the_previous(self) -> None:
        """A final chunk under 256 B joins its predecessor when the result is ≤ 4 KiB."""
        assert pack_pieces([(0, 3000), (3000, 3255)]) == [(0, 3255)]

    def test_short_final_chunk_stays_when_merging_would_exceed_the_maximum(self) -> None:
        """The tail rule never produces a chunk above 4 KiB."""
        assert pack_pieces([(0, 4000), (4000, 4100)]) == [(0, 4000), (4000, 4100)]

    def test_final_chunk_of_exactly_min_tail_stays(self) -> None:
        """Only tails strictly below 256 B are merged."""
        assert pack_pieces([(0, 3000), (3000, 3000 + MIN_TAIL_BYTES)]) == [
            (0, 3000),
            (3000, 3256),
        ]


class TestChunkBody:
    def test_empty_body_has_no_chunks(self) -> None:
        """Nothing to cite, nothing to chunk."""
        assert chunk_body("") == []

    def test_small_document_is_one_chunk(self) -> None:
        """A short note becomes a single chunk covering every byte."""
        body = "# Decision\n\nUse SQLite.\n\n## Why\n\nOne writer.\n"
        assert chunk_body(body) == [Chunk(0, 0, len(body.encode()), body)]

    def test_chunks_carry_ordinals_spans_and_exact_text(self) -> None:
        """Each chunk's text is the UTF-8 slice named by its span."""
        body = ("# Section é\n\n" + "Sentence with 漢字. " * 150 + "\n\n") * 4
        data = body.encode()
        chunks = chunk_body(body)
        assert [chunk.ordinal for chunk in chunks] == list(range(len(chunks)))
        for chunk in chunks:
            assert data[chunk.start_byte : chunk.end_byte].decode() == chunk.text
        assert len(chunks) > 1

    def test_version_constant(self) -> None:
        """Spans are produced by chunker version 1."""
        assert CHUNKER_VERSION == 1

    @settings(max_examples=150)
    @given(st.one_of(DOCUMENT, LONG_RUN, st.text(max_size=9000)))
    def test_chunks_form_an_exact_dense_partition(self, text: str) -> None:
        """For any Unicode body the chunks tile its UTF-8 bytes on code-point boundaries."""
        data = text.encode()
        chunks = chunk_body(text)
        assert_exact_partition(data, [(chunk.start_byte, chunk.end_byte) for chunk in chunks])
        assert "".join(chunk.text for chunk in chunks) == text
        for chunk in chunks:
            assert chunk.end_byte - chunk.start_byte <= MAX_CHUNK_BYTES
            assert is_char_boundary(data, chunk.start_byte)
            assert is_char_boundary(data, chunk.end_byte)

    @given(st.one_of(DOCUMENT, LONG_RUN))
    def test_chunking_is_deterministic(self, text: str) -> None:
        """The same body always produces the same spans."""
        assert chunk_spans(text.encode()) == chunk_spans(text.encode())


class TestMatchedWindow:
    def test_short_excerpt_is_returned_whole(self) -> None:
        """An excerpt within the budget is not windowed."""
        assert matched_window("short text", ["text"], 320) == ExcerptWindow(
            "short text", 0, 10, False
        )

    def test_window_centres_on_the_term_with_lead_context(self) -> None:
        """The window starts about max/4 before the match, after a word boundary."""
        text = "lorem ipsum " * 100 + "the RETRY budget was raised " + "dolor sit " * 100
        window = matched_window(text, ["retry"], 120)
        data = text.encode()
        assert window.truncated
        assert data[window.start_byte : window.end_byte].decode() == window.text
        assert "RETRY budget" in window.text
        assert window.end_byte - window.start_byte <= 120
        match_at = data.index(b"RETRY")
        assert match_at - 30 <= window.start_byte <= match_at
        assert data[window.start_byte - 1 : window.start_byte] == b" "

    def test_window_covers_the_most_distinct_terms(self) -> None:
        """A region holding two different terms beats an earlier region holding one."""
        text = "alpha " + "x" * 400 + " beta filler alpha here " + "y" * 400
        window = matched_window(text, ["alpha", "beta"], 100)
        assert "alpha" in window.text and "beta" in window.text

    def test_earliest_window_wins_ties(self) -> None:
        """Equal coverage keeps the first candidate position."""
        text = "z" * 300 + " alpha " + "z" * 300 + " alpha " + "z" * 300
        window = matched_window(text, ["alpha"], 64)
        assert window.start_byte < 330

    def test_alternative_spellings_count_as_one_term(self) -> None:
        """Inflection variants of one unit add no extra coverage."""
        text = "q" * 300 + " logging logs " + "q" * 300 + " logs cache " + "q" * 300
        window = matched_window(text, [("logs", "logging"), "cache"], 80)
        assert "cache" in window.text

    def test_phrase_terms_match_across_punctuation(self) -> None:
        """A phrase term finds its words joined by hyphens or underscores, any case."""
        text = "n" * 500 + " the Cold-Start path " + "n" * 500
        assert "Cold-Start" in matched_window(text, ["cold start"], 64).text

    def test_no_match_falls_back_to_the_head_window(self) -> None:
        """Without occurrences the first max bytes are shown."""
        text = "é" * 400
        window = matched_window(text, ["absent"], 101)
        assert window == ExcerptWindow("é" * 50, 0, 100, True)

    def test_window_never_splits_code_points(self) -> None:
        """Start and end snap to UTF-8 boundaries around multi-byte text."""
        text = "漢字" * 200 + " target " + "😀" * 200
        window = matched_window(text, ["target"], 50)
        data = text.encode()
        assert data[window.start_byte : window.end_byte] == window.text.encode()
        assert "target" in window.text

    def test_shifted_span_reanchors_to_the_parent(self) -> None:
        """The shown bytes map to absolute offsets by adding the chunk's start."""
        window = ExcerptWindow("abc", 10, 13, True)
        assert window.shifted(2048) == (2058, 2061)

    @given(
        st.text(alphabet="ab é漢😀\n", min_size=1, max_size=3000),
        st.lists(st.sampled_from(["a", "b", "é", "漢", "ab", "a b"]), max_size=3),
        st.integers(min_value=1, max_value=1024),
    )
    def test_window_span_is_exact_and_bounded(
        self, text: str, terms: list[str], max_bytes: int
    ) -> None:
        """The window text is exactly the bytes its span names, and at most max_bytes long."""
        data = text.encode()
        window = matched_window(text, terms, max_bytes)
        assert data[window.start_byte : window.end_byte] == window.text.encode()
        assert window.end_byte - window.start_byte <= max_bytes
        assert window.truncated == (len(data) > max_bytes)


class TestTermOccurrences:
    def test_occurrences_are_byte_offsets_in_text_order(self) -> None:
        """Matches report UTF-8 byte spans and the index of their term."""
        assert term_occurrences("é Cache é cache", ["cache"]) == [(3, 8, 0), (12, 17, 0)]

    def test_ascii_and_non_ascii_texts_give_the_same_byte_spans_of_the_same_words(self) -> None:
        """An ASCII text's spans and a non-ASCII text's spans both name the exact bytes matched."""
        for text in ("Cold-Start then cold start", "Cold-Start then cold start é", "é Cold_Start, cold start"):
            data = text.encode()
            spans = term_occurrences(text, [("cold start", "cold")])
            assert spans and all(data[start:end].lower().startswith(b"cold") for start, end, _ in spans)
            assert [data[start:end].lower() for start, end, _ in spans].count(b"cold start") == 1

    def test_occurrences_are_capped_at_512(self) -> None:
        """At most 512 occurrences are considered."""
        assert len(term_occurrences("a " * 1000, ["a"])) == 512


class TestHeadWindowAndCitations:
    def test_head_window_truncates_on_a_boundary(self) -> None:
        """The head window is the longest prefix within the limit."""
        assert head_window("aé漢", 4) == ExcerptWindow("aé", 0, 3, True)
        assert head_window("abc", 10) == ExcerptWindow("abc", 0, 3, False)

    def test_span_citation_format(self) -> None:
        """Artifact citations name the revision and optionally the exact byte span."""
        assert span_citation("art_1", "arev_2", (10, 42)) == "memoree://artifact/art_1@arev_2#10-42"
        assert span_citation("art_1", "arev_2") == "memoree://artifact/art_1@arev_2"
