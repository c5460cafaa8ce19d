"""Tests for query analysis (`lexical_qualification_v2`, protocol §5.1)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoree.queries.analysis import (
    STOPWORDS,
    QueryError,
    QueryUnit,
    analyze_query,
    fts_phrase,
    inflection_stem,
    inflection_variants,
    query_match_expression,
    required_matches,
    script_profile,
    unit_match_expression,
)


def units_of(query: str) -> list[tuple[str, bool]]:
    return [(unit.display, unit.phrase) for unit in analyze_query(query).units]


class TestQueryLimits:
    def test_query_over_8_kib_is_rejected_with_the_spec_message(self) -> None:
        """A query longer than 8192 UTF-8 bytes is refused before any parsing."""
        with pytest.raises(QueryError, match="^search query must not exceed 8192 bytes$"):
            analyze_query("a" * 8193)

    def test_byte_limit_counts_utf8_bytes_not_characters(self) -> None:
        """4097 two-byte characters are 8194 bytes and therefore too long."""
        with pytest.raises(QueryError, match="8192 bytes"):
            analyze_query("é" * 4097)

    def test_query_of_exactly_8_kib_is_accepted(self) -> None:
        """The bound is inclusive: 8192 bytes still parses."""
        query = " ".join(["word"] * 40)
        query = query + " " + "x" * (8192 - len(query) - 1)
        assert len(query.encode()) == 8192
        assert analyze_query(query).units

    @pytest.mark.parametrize("query", ["", "   ", "?!", '""', "-- ... --", '" "'])
    def test_query_without_words_is_rejected_with_the_spec_message(self, query: str) -> None:
        """No tokens at all is INVALID_REQUEST with the exact upstream wording."""
        with pytest.raises(
            QueryError, match="^search query must contain at least one word or identifier$"
        ):
            analyze_query(query)

    def test_more_than_48_tokens_is_rejected(self) -> None:
        """49 distinct words exceed the 48 word-component limit."""
        with pytest.raises(QueryError, match="48"):
            analyze_query(" ".join(f"w{i}" for i in range(49)))

    def test_exactly_48_tokens_is_accepted(self) -> None:
        """48 words is within the limit."""
        assert len(analyze_query(" ".join(f"w{i}" for i in range(48))).units) == 48

    def test_token_limit_counts_phrase_parts_and_repeats_before_dedup(self) -> None:
        """Tokens are counted before stopword removal and dedup, phrase parts included."""
        with pytest.raises(QueryError):
            analyze_query(" ".join(["APP-BOUNDARY-101"] * 17))  # 51 tokens
        with pytest.raises(QueryError):
            analyze_query("the " * 49)

    def test_query_error_is_a_value_error(self) -> None:
        """The service can treat QueryError as an ordinary ValueError."""
        assert issubclass(QueryError, ValueError)


class TestQuotedPhrases:
    def test_balanced_quotes_make_one_phrase_unit(self) -> None:
        """Text inside a quote pair becomes one mandatory phrase unit of its tokens."""
        assert units_of('"Cold Start" cache') == [("cold start", True), ("cache", False)]

    def test_unmatched_quote_is_ordinary_text(self) -> None:
        """After the last balanced pair, a lone quote does not open a phrase."""
        assert units_of('deploy "cold start') == [
            ("deploy", False),
            ("cold", False),
            ("start", False),
        ]

    def test_unmatched_quote_after_a_balanced_pair(self) -> None:
        """Only the first two quotes pair up; the third is ordinary text."""
        assert units_of('"b c" d "e f') == [
            ("b c", True),
            ("d", False),
            ("e", False),
            ("f", False),
        ]

    def test_single_quoted_word_is_still_a_phrase(self) -> None:
        """A quoted single word is mandatory and never inflection-folded."""
        analyzed = analyze_query('"logs" rotation')
        assert units_of('"logs" rotation') == [("logs", True), ("rotation", False)]
        assert analyzed.units[0].fts_expression == '"logs"'

    def test_empty_quotes_contribute_nothing(self) -> None:
        """An empty or punctuation-only quote pair adds no unit."""
        assert units_of('"" cache "!!"') == [("cache", False)]

    def test_punctuation_and_hyphens_inside_quotes_split_tokens(self) -> None:
        """Inside quotes every run of letters/digits/_ is a token of the phrase."""
        assert units_of('"cold-start, fast_path!"') == [("cold start fast_path", True)]

    def test_quoted_phrase_keeps_its_stopwords(self) -> None:
        """Stopwords inside a phrase are part of the phrase."""
        assert units_of('"the state of the art" x') == [
            ("the state of the art", True),
            ("x", False),
        ]


class TestHyphenatedIdentifiers:
    def test_app_boundary_identifier_becomes_a_mandatory_phrase(self) -> None:
        """`APP-BOUNDARY-101` is one phrase unit of its three lowercased parts."""
        analyzed = analyze_query("APP-BOUNDARY-101")
        assert units_of("APP-BOUNDARY-101") == [("app boundary 101", True)]
        assert analyzed.analysis.phrase_groups == ["app boundary 101"]
        assert analyzed.match_expression == '"app boundary 101"'

    def test_two_part_word_is_a_phrase(self) -> None:
        """`cold-start` has two parts, enough for a phrase unit."""
        assert units_of("cold-start latency") == [("cold start", True), ("latency", False)]

    def test_surrounding_punctuation_is_trimmed_before_the_check(self) -> None:
        """Leading/trailing characters other than word characters and `-` are trimmed."""
        assert units_of("(APP-BOUNDARY-101),") == [("app boundary 101", True)]

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("a--b", [("b", False)]),  # empty middle part; `a` is then a dropped stopword
            ("-cache-", [("cache", False)]),  # empty outer parts
            ("cache-", [("cache", False)]),
            ("x-y.z", [("x", False), ("y", False), ("z", False)]),  # `y.z` is not word chars
        ],
    )
    def test_malformed_hyphenation_falls_back_to_free_tokens(
        self, query: str, expected: list[tuple[str, bool]]
    ) -> None:
        """Only all-non-empty word parts form a phrase; otherwise tokens are free units."""
        assert units_of(query) == expected

    def test_underscore_and_unicode_parts_are_allowed(self) -> None:
        """Parts may contain `_` and non-ASCII letters."""
        assert units_of("fast_path-Größe") == [("fast_path größe", True)]


class TestTokenization:
    def test_tokens_are_lowercased(self) -> None:
        """Display forms are lowercase."""
        assert units_of("SQLite WAL") == [("sqlite", False), ("wal", False)]

    def test_underscore_stays_inside_a_token(self) -> None:
        """`webhook_events` is a single token, quoted as a phrase for FTS5."""
        analyzed = analyze_query("webhook_events")
        assert units_of("webhook_events") == [("webhook_events", False)]
        assert analyzed.match_expression == '"webhook_events"'

    def test_other_punctuation_splits_tokens(self) -> None:
        """Slashes, dots and colons separate tokens."""
        assert units_of("src/app.rs std::io") == [
            ("src", False),
            ("app", False),
            ("rs", False),
            ("std", False),
            ("io", False),
        ]

    def test_tokenization_is_unicode_aware(self) -> None:
        """Non-Latin letters form tokens like Latin ones do."""
        assert units_of("Привет 東京 Grüße") == [
            ("привет", False),
            ("東京", False),
            ("grüße", False),
        ]

    def test_combining_marks_stay_inside_their_word(self) -> None:
        """Decomposed accents and Indic vowel signs do not split a word."""
        assert units_of("cafe\u0301 हिन्दी") == [("cafe\u0301", False), ("हिन्दी", False)]

    def test_any_whitespace_separates_pieces(self) -> None:
        """Tabs and newlines separate pieces like spaces."""
        assert units_of("alpha\tbeta\ngamma") == [
            ("alpha", False),
            ("beta", False),
            ("gamma", False),
        ]


class TestStopwords:
    def test_stopword_list_is_exactly_the_spec_list(self) -> None:
        """The list matches §5.1 item 6 word for word."""
        spec = (
            "a about an and are as at be been but by can could did do does for from had has "
            "have how i if in into is it its may of on or should that the their this to was "
            "were what when where which who why will with would"
        )
        assert STOPWORDS == frozenset(spec.split())
        assert len(STOPWORDS) == 50

    def test_stopwords_are_dropped_when_other_units_remain(self) -> None:
        """Free stopword units disappear and are reported sorted and deduplicated."""
        analyzed = analyze_query("Why was the cache and the WAL enabled")
        assert [unit.display for unit in analyzed.units] == ["cache", "wal", "enabled"]
        assert analyzed.analysis.dropped_stopwords == ["and", "the", "was", "why"]

    def test_all_stopword_query_keeps_every_unit(self) -> None:
        """If only stopwords exist nothing is dropped, and none are reported."""
        analyzed = analyze_query("what is the")
        assert [unit.display for unit in analyzed.units] == ["what", "is", "the"]
        assert analyzed.analysis.dropped_stopwords == []

    def test_a_phrase_unit_is_enough_to_drop_free_stopwords(self) -> None:
        """A remaining phrase counts as something else remaining."""
        analyzed = analyze_query('the "of"')
        assert units_of('the "of"') == [("of", True)]
        assert analyzed.analysis.dropped_stopwords == ["the"]

    def test_stopwords_inside_hyphenated_identifiers_are_kept(self) -> None:
        """Only free units are candidates for dropping."""
        assert units_of("the state-of-the-art") == [("state of the art", True)]

    def test_stopword_matching_is_case_insensitive(self) -> None:
        """Tokens are lowercased before the stopword test."""
        assert analyze_query("THE Cache").analysis.dropped_stopwords == ["the"]


class TestDeduplication:
    def test_repeated_free_units_collapse_keeping_first_order(self) -> None:
        """Case variants of one word become a single unit at its first position."""
        assert units_of("logs cache LOGS Logs") == [("logs", False), ("cache", False)]

    def test_phrase_and_free_unit_with_same_display_are_distinct(self) -> None:
        """Dedup keys on (phrase flag, display)."""
        assert units_of('"cache" cache') == [("cache", True), ("cache", False)]

    def test_repeated_phrases_collapse(self) -> None:
        """A quoted phrase equal to a hyphenated identifier is one unit."""
        assert units_of('cold-start "cold start"') == [("cold start", True)]

    def test_required_matches_uses_the_deduplicated_count(self) -> None:
        """Five words with two repeats count as three units."""
        analyzed = analyze_query("alpha beta alpha gamma beta")
        assert analyzed.required_matches == 2
        assert len(analyzed.units) == 3


class TestRequiredMatches:
    @pytest.mark.parametrize(
        ("unit_count", "expected"),
        [(0, 0), (1, 1), (2, 2), (3, 2), (4, 2), (5, 2), (6, 3), (7, 3), (8, 4), (10, 4),
         (11, 5), (13, 6), (48, 20)],
    )
    def test_required_matches_table(self, unit_count: int, expected: int) -> None:
        """0→0, 1→1, 2→2, then max(2, ceil(2n/5))."""
        assert required_matches(unit_count) == expected

    @given(st.integers(min_value=3, max_value=10_000))
    def test_required_matches_formula_for_three_or_more(self, unit_count: int) -> None:
        """For n ≥ 3 the value equals max(2, ceil(2n/5)) computed with exact arithmetic."""
        ceiling = -(-2 * unit_count // 5)
        assert required_matches(unit_count) == max(2, ceiling)

    def test_query_reports_required_matches(self) -> None:
        """The analysis carries the requirement for its unit count."""
        assert analyze_query("a1 b2 c3 d4 e5 f6").analysis.required_matches == 3


class TestInflectionVariants:
    @pytest.mark.parametrize(
        ("token", "expected"),
        [
            ("log", ["log", "logs", "logging", "logged", "loger"]),
            ("logs", ["logs", "log", "logging", "logged", "loger"]),
            ("logging", ["logging", "log", "logs", "logged", "loger"]),
            ("logged", ["logged", "log", "logs", "logging", "loger"]),
            ("queries", ["queries", "query", "querying", "queryed", "queryer"]),
            ("query", ["query", "queries", "querying", "queryed", "queryer"]),
            ("boxes", ["boxes", "box", "boxing", "boxed", "boxer"]),
            ("matches", ["matches", "match", "matching", "matched", "matcher"]),
            ("caches", ["caches", "cach", "caching", "cached", "cacher"]),
            ("use", ["use", "uses", "using", "used", "user"]),
            ("deployed", ["deployed", "deploy", "deploys", "deploying", "deployer"]),
            ("running", ["running", "run", "runs", "runned", "runer"]),
        ],
    )
    def test_known_inflection_families(self, token: str, expected: list[str]) -> None:
        """Variants are [token, stem, plural, -ing, -ed, -er] deduplicated in that order."""
        assert inflection_variants(token) == expected

    @pytest.mark.parametrize(
        ("token", "stem"),
        [
            ("queries", "query"),  # ies → y, base ≥ 2
            ("ties", "tie"),  # base "t" is too short for ies → y, so only the s is stripped
            ("boxes", "box"),  # es after sibilant x
            ("wishes", "wish"),  # es after sh
            ("class", "class"),  # s after s is not a plural
            ("status", "status"),  # s after u is not a plural
            ("gas", "gas"),  # base "ga" is too short
            ("logs", "log"),
            ("logging", "log"),  # ing, then undouble gg
            ("sing", "sing"),  # base "s" too short
            ("planned", "plan"),  # ed, then undouble nn
            ("red", "red"),  # base too short
        ],
    )
    def test_stem_rules(self, token: str, stem: str) -> None:
        """Suffixes are stripped only when the remaining base is long enough."""
        assert inflection_stem(token) == stem

    def test_doubling_skips_w_x_y_final_consonants(self) -> None:
        """CVC stems ending in w, x or y are not doubled (box → boxing, not boxxing)."""
        assert "boxing" in inflection_variants("box")
        assert "sawing" in inflection_variants("saw")
        assert "playing" in inflection_variants("play")

    @pytest.mark.parametrize("token", ["go", "ab", "x", "Logs", "log2", "café", "日本語", "log_x"])
    def test_ineligible_tokens_are_not_folded(self, token: str) -> None:
        """Only lowercase ASCII-alphabetic tokens of three or more characters are folded."""
        assert inflection_variants(token) == [token]

    @given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=14))
    def test_variant_invariants(self, token: str) -> None:
        """At most six unique forms, the token first, every form at least three chars long."""
        variants = inflection_variants(token)
        assert variants[0] == token
        assert len(variants) <= 6
        assert len(set(variants)) == len(variants)
        assert all(len(variant) >= 3 for variant in variants)

    def test_folded_unit_counts_once(self) -> None:
        """A folded token is one unit, so requirements don't grow with variants."""
        analyzed = analyze_query("logging")
        assert len(analyzed.units) == 1
        assert analyzed.required_matches == 1


class TestMatchExpressions:
    def test_single_free_token_becomes_an_or_group_of_variants(self) -> None:
        """Folded variants are each quoted and OR-ed inside parentheses."""
        unit = QueryUnit(tokens=("logs",), phrase=False)
        assert unit_match_expression(unit) == (
            '("logs" OR "log" OR "logging" OR "logged" OR "loger")'
        )

    def test_single_variant_token_is_just_quoted(self) -> None:
        """Numbers and short tokens have one variant and no group."""
        assert unit_match_expression(QueryUnit(tokens=("101",), phrase=False)) == '"101"'

    def test_phrase_is_quoted_display_without_folding(self) -> None:
        """Phrase units are quoted as a whole."""
        unit = QueryUnit(tokens=("cold", "start"), phrase=True)
        assert unit_match_expression(unit) == '"cold start"'

    def test_multi_token_free_unit_is_quoted_as_a_phrase(self) -> None:
        """A free unit with several tokens is never folded."""
        assert unit_match_expression(QueryUnit(tokens=("a", "b"), phrase=False)) == '"a b"'

    def test_embedded_double_quotes_are_doubled(self) -> None:
        """FTS5 string escaping doubles double quotes."""
        assert fts_phrase('say "hi"') == '"say ""hi"""'

    def test_whole_query_joins_unit_expressions_with_or(self) -> None:
        """The candidate expression is the OR of every unit expression in unit order."""
        analyzed = analyze_query('APP-BOUNDARY-101 "cold start" 42')
        assert analyzed.match_expression == '"app boundary 101" OR "cold start" OR "42"'
        assert analyzed.match_expression == query_match_expression(analyzed.units)

    def test_mixed_query_expression(self) -> None:
        """Folded groups and phrases combine in one expression."""
        assert analyze_query("webhook logs").match_expression == (
            '("webhook" OR "webhooks" OR "webhooking" OR "webhooked" OR "webhooker") OR '
            '("logs" OR "log" OR "logging" OR "logged" OR "loger")'
        )


class TestNormalizedQuery:
    def test_phrases_are_quoted_and_free_units_plain(self) -> None:
        """normalized_query joins units with spaces, phrases wrapped in quotes."""
        analyzed = analyze_query('Where is the APP-BOUNDARY-101 "Retry Budget" logs?')
        assert analyzed.analysis.normalized_query == '"app boundary 101" "retry budget" logs'

    def test_content_units_and_phrase_groups(self) -> None:
        """content_units lists every unit display; phrase_groups only the phrases."""
        analysis = analyze_query('"retry budget" cache-miss logs').analysis
        assert analysis.content_units == ["retry budget", "cache miss", "logs"]
        assert analysis.phrase_groups == ["retry budget", "cache miss"]


class TestRetrievalProfile:
    @pytest.mark.parametrize(
        ("query", "count"),
        [
            ("webhook_events table", 1),
            ("error E42 again", 1),
            ("std::io reader", 1),
            ("see src/app.rs now", 1),
            ("APP-BOUNDARY-101", 1),
            ("plain words only", 0),
            ("version 2", 0),  # digit and letter must share one piece
            ("a_b c::d e/f g7", 4),
        ],
    )
    def test_identifier_like_units_counts_whitespace_pieces(self, query: str, count: int) -> None:
        """Pieces with `_`, `::`, `/` or a digit together with a letter are identifier-like."""
        profile = analyze_query(query).analysis.retrieval_profile
        assert profile.identifier_like_units == count

    @pytest.mark.parametrize(
        ("query", "intent", "authority"),
        [
            ("what did we decide previously about caching", "historical_memory",
             "memory_for_history_repository_for_current_source"),
            ("audit trail for payments", "historical_memory",
             "memory_for_history_repository_for_current_source"),
            ("where is the retry loop", "current_source", "repository_authoritative"),
            ("retry loop defined in worker", "current_source", "repository_authoritative"),
            ("state after the migration", "current_source", "repository_authoritative"),
            ("how does it work right now", "current_source", "repository_authoritative"),
            ("config_loader timeout", "identifier_lookup",
             "repository_first_for_live_identifiers"),
            ("retry budget", "ambiguous", "compare_memory_with_current_authoritative_source"),
        ],
    )
    def test_intent_and_authority_hints(self, query: str, intent: str, authority: str) -> None:
        """Intent markers are checked in order: historical, current source, identifier, else."""
        profile = analyze_query(query).analysis.retrieval_profile
        assert (profile.intent_hint, profile.authority_hint) == (intent, authority)

    def test_historical_markers_win_over_current_source_markers(self) -> None:
        """A query with both kinds of marker is historical."""
        profile = analyze_query("where is the previous config").analysis.retrieval_profile
        assert profile.intent_hint == "historical_memory"

    def test_markers_are_case_insensitive(self) -> None:
        """Matching lowercases the query first."""
        profile = analyze_query("WHERE IS Retry").analysis.retrieval_profile
        assert profile.intent_hint == "current_source"

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("hello", "latin"),
            ("Ærøskøbing ǅ ẞ", "latin"),
            ("привет", "cyrillic"),
            ("مرحبا", "arabic"),
            ("ひらがな カタカナ", "cjk"),
            ("東京", "cjk"),
            ("한국어", "cjk"),
            ("Ελληνικά", "other"),
            ("1234 !?", "unknown"),
            ("hello мир", "mixed"),
        ],
    )
    def test_script_profile(self, text: str, expected: str) -> None:
        """Scripts come from alphabetic characters only, by code-point range."""
        assert script_profile(text) == expected

    def test_profile_constants(self) -> None:
        """The profile is versioned and declares itself routing-only."""
        profile = analyze_query("anything").analysis.retrieval_profile
        assert profile.policy_version == "conservative_query_profile_v1"
        assert profile.semantic_role == "candidate_and_ordering_only"


class TestWireShape:
    def test_query_analysis_serializes_to_the_spec_field_names(self) -> None:
        """`query_analysis` JSON has exactly the §5.1 keys, in that order."""
        analyzed = analyze_query('Why APP-BOUNDARY-101 "cold start" logs')
        encoded = msgspec.json.decode(msgspec.json.encode(analyzed.analysis))
        assert list(encoded) == [
            "policy_version",
            "normalized_query",
            "content_units",
            "phrase_groups",
            "dropped_stopwords",
            "required_matches",
            "retrieval_profile",
        ]
        assert list(encoded["retrieval_profile"]) == [
            "policy_version",
            "identifier_like_units",
            "intent_hint",
            "authority_hint",
            "script_profile",
            "semantic_role",
        ]
        assert encoded == analyzed.to_dict()

    def test_full_example(self) -> None:
        """A complete analysis for a representative query."""
        assert analyze_query('Why did APP-BOUNDARY-101 "Cold Start" logs fail?').to_dict() == {
            "policy_version": "lexical_qualification_v2",
            "normalized_query": '"app boundary 101" "cold start" logs fail',
            "content_units": ["app boundary 101", "cold start", "logs", "fail"],
            "phrase_groups": ["app boundary 101", "cold start"],
            "dropped_stopwords": ["did", "why"],
            "required_matches": 2,
            "retrieval_profile": {
                "policy_version": "conservative_query_profile_v1",
                "identifier_like_units": 1,
                "intent_hint": "identifier_lookup",
                "authority_hint": "repository_first_for_live_identifiers",
                "script_profile": "latin",
                "semantic_role": "candidate_and_ordering_only",
            },
        }

    @given(st.text(max_size=200))
    def test_analysis_is_total_and_deterministic(self, query: str) -> None:
        """Any string either raises QueryError or analyses identically twice."""
        try:
            first = analyze_query(query)
        except QueryError:
            with pytest.raises(QueryError):
                analyze_query(query)
            return
        assert analyze_query(query) == first
        assert first.units
        assert first.analysis.required_matches == required_matches(len(first.units))
        assert len({(unit.phrase, unit.display) for unit in first.units}) == len(first.units)
