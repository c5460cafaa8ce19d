"""Query analysis for retrieval (`lexical_qualification_v2`, protocol §5.1).

This module owns the pure, deterministic translation of a caller's search query into query
units (mandatory phrase units and optional free units), the FTS5 MATCH expressions that find and
qualify candidates, inflection folding for single free tokens, and the routing-only
`retrieval_profile`. It performs no I/O; the service maps `QueryError` to INVALID_REQUEST.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable, Sequence

import msgspec

POLICY_VERSION = "lexical_qualification_v2"
PROFILE_POLICY_VERSION = "conservative_query_profile_v1"
SEMANTIC_ROLE = "candidate_and_ordering_only"

MAX_QUERY_BYTES = 8192
MAX_QUERY_TOKENS = 48
MAX_INFLECTION_VARIANTS = 6

STOPWORDS = frozenset(
    """
    a about an and are as at be been but by can could did do does for from had has have how i
    if in into is it its may of on or should that the their this to was were what when where
    which who why will with would
    """.split()
)

# The usual English function-word list (wider than ``STOPWORDS``, which keeps words such as
# "not" or "only" that change what a query's units must match): what soft coverage leaves out of
# its comparison, and what the LoCoMo baseline's query drops, as that folder's README says.
ENGLISH_STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me
might more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who whom
why will with would you your yours yourself yourselves
""".split())

HISTORICAL_MARKERS = (
    "previous", "previously", "prior", "earlier", "history", "historical", "decided",
    "decision", "learned", "audit", "remember",
)
CURRENT_SOURCE_MARKERS = (
    "current code", "current implementation", "currently", "source code", "where is",
    "defined in", "this version", "after the migration", "after migration", "right now",
    "latest state",
)
AUTHORITY_BY_INTENT = {
    "historical_memory": "memory_for_history_repository_for_current_source",
    "current_source": "repository_authoritative",
    "identifier_lookup": "repository_first_for_live_identifiers",
    "ambiguous": "compare_memory_with_current_authoritative_source",
}

_VOWELS = frozenset("aeiou")
_SIBILANT_ENDINGS = ("s", "x", "z", "ch", "sh")


class QueryError(ValueError):
    """A query the protocol rejects; the service reports it as INVALID_REQUEST."""


class QueryUnit(msgspec.Struct, frozen=True):
    """One unit of a query: a mandatory phrase, or an optional free token."""

    tokens: tuple[str, ...]
    phrase: bool

    @property
    def display(self) -> str:
        return " ".join(self.tokens)

    @property
    def normalized(self) -> str:
        return f'"{self.display}"' if self.phrase else self.display

    @property
    def variants(self) -> tuple[str, ...]:
        """Inflection-folded spellings; only single free tokens are folded."""
        if self.phrase or len(self.tokens) != 1:
            return (self.display,)
        return _token_variants(self.tokens[0])

    @property
    def fts_expression(self) -> str:
        return unit_match_expression(self)


class RetrievalProfile(msgspec.Struct, frozen=True):
    """Routing metadata only (`conservative_query_profile_v1`); never affects qualification."""

    policy_version: str
    identifier_like_units: int
    intent_hint: str
    authority_hint: str
    script_profile: str
    semantic_role: str


class QueryAnalysis(msgspec.Struct, frozen=True):
    """The wire shape reported as `query_analysis` in search/recall/retrieve results."""

    policy_version: str
    normalized_query: str
    content_units: list[str]
    phrase_groups: list[str]
    dropped_stopwords: list[str]
    required_matches: int
    retrieval_profile: RetrievalProfile


class AnalyzedQuery(msgspec.Struct, frozen=True):
    """Everything retrieval needs: the units, their MATCH expression, and the wire analysis."""

    units: tuple[QueryUnit, ...]
    analysis: QueryAnalysis

    @property
    def match_expression(self) -> str:
        return query_match_expression(self.units)

    @property
    def required_matches(self) -> int:
        return self.analysis.required_matches

    @property
    def phrase_units(self) -> tuple[QueryUnit, ...]:
        return tuple(unit for unit in self.units if unit.phrase)

    @property
    def free_units(self) -> tuple[QueryUnit, ...]:
        return tuple(unit for unit in self.units if not unit.phrase)

    def to_dict(self) -> dict:
        return msgspec.to_builtins(self.analysis)


def analyze_query(query: str) -> AnalyzedQuery:
    """Analyse a search query per §5.1, raising `QueryError` for rejected queries."""
    if len(query.encode("utf-8")) > MAX_QUERY_BYTES:
        raise QueryError(f"search query must not exceed {MAX_QUERY_BYTES} bytes")
    units = parse_units(query)
    if not units:
        raise QueryError("search query must contain at least one word or identifier")
    if sum(len(unit.tokens) for unit in units) > MAX_QUERY_TOKENS:
        raise QueryError(
            f"search query must not contain more than {MAX_QUERY_TOKENS} words or identifier parts"
        )
    units, dropped = drop_stopwords(units)
    units = dedupe_units(units)
    normalized = normalized_query(units)
    analysis = QueryAnalysis(
        policy_version=POLICY_VERSION,
        normalized_query=normalized,
        content_units=[unit.display for unit in units],
        phrase_groups=[unit.display for unit in units if unit.phrase],
        dropped_stopwords=dropped,
        required_matches=required_matches(len(units)),
        retrieval_profile=retrieval_profile(query),
    )
    return AnalyzedQuery(units=tuple(units), analysis=analysis)


def parse_units(query: str) -> list[QueryUnit]:
    """Split a query into phrase and free units, in query order, before stopwords and dedup."""
    units: list[QueryUnit] = []
    for text, quoted in quote_segments(query):
        if quoted:
            tokens = tuple(token.lower() for token in word_runs(text))
            if tokens:
                units.append(QueryUnit(tokens=tokens, phrase=True))
        else:
            units.extend(unquoted_units(text))
    return units


def quote_segments(query: str) -> list[tuple[str, bool]]:
    """Split on `"` into (text, quoted) segments; an unmatched final quote is ordinary text."""
    pieces = query.split('"')
    balanced_pairs = (len(pieces) - 1) // 2
    segments: list[tuple[str, bool]] = []
    for index, piece in enumerate(pieces):
        quoted = index % 2 == 1 and (index + 1) // 2 <= balanced_pairs
        if quoted or not segments or segments[-1][1]:
            segments.append((piece, quoted))
        else:
            # Text after an unmatched quote joins the preceding ordinary text; the quote itself
            # is just a separator character there.
            segments[-1] = (segments[-1][0] + '"' + piece, False)
    return segments


def unquoted_units(text: str) -> list[QueryUnit]:
    """Units for unquoted text: hyphenated identifiers become phrases, other words free tokens."""
    units: list[QueryUnit] = []
    for raw_piece in text.split():
        piece = trim_piece(raw_piece)
        parts = hyphenated_parts(piece)
        if parts:
            units.append(QueryUnit(tokens=tuple(part.lower() for part in parts), phrase=True))
            continue
        units.extend(QueryUnit(tokens=(token.lower(),), phrase=False) for token in word_runs(piece))
    return units


def trim_piece(piece: str) -> str:
    """Strip leading/trailing characters that are not word characters or `-`."""
    start, end = 0, len(piece)
    while start < end and not _is_piece_char(piece, start):
        start += 1
    while end > start and not _is_piece_char(piece, end - 1):
        end -= 1
    return piece[start:end]


def hyphenated_parts(piece: str) -> list[str] | None:
    """The parts of `APP-BOUNDARY-101`-style identifiers, or None when the piece is not one."""
    parts = piece.split("-")
    if len(parts) < 2:
        return None
    if all(word_runs(part) == [part] for part in parts):
        return parts
    return None


def word_runs(text: str) -> list[str]:
    """Maximal runs of Unicode letters, digits and `_` (combining marks stay inside a word)."""
    runs: list[str] = []
    current: list[str] = []
    for char in text:
        if _is_word_char(char) or (current and _is_combining_mark(char)):
            current.append(char)
        elif current:
            runs.append("".join(current))
            current = []
    if current:
        runs.append("".join(current))
    return runs


def drop_stopwords(units: Sequence[QueryUnit]) -> tuple[list[QueryUnit], list[str]]:
    """Drop free stopword units, but only when a phrase or non-stopword unit would remain."""
    kept = [unit for unit in units if not _is_stopword_unit(unit)]
    if not kept:
        return list(units), []
    return kept, sorted({unit.display for unit in units if _is_stopword_unit(unit)})


def dedupe_units(units: Iterable[QueryUnit]) -> list[QueryUnit]:
    """Remove repeated units keyed by (phrase flag, display), keeping first occurrences."""
    seen: set[tuple[bool, str]] = set()
    unique: list[QueryUnit] = []
    for unit in units:
        key = (unit.phrase, unit.display)
        if key not in seen:
            seen.add(key)
            unique.append(unit)
    return unique


def required_matches(unit_count: int) -> int:
    """How many units a candidate must match: 0, 1, 2, then max(2, ceil(2n/5))."""
    if unit_count <= 2:
        return unit_count
    return max(2, (2 * unit_count + 4) // 5)


def normalized_query(units: Iterable[QueryUnit]) -> str:
    return " ".join(unit.normalized for unit in units)


def fts_phrase(text: str) -> str:
    """Quote text as an FTS5 string, doubling embedded double quotes."""
    return '"' + text.replace('"', '""') + '"'


def unit_match_expression(unit: QueryUnit) -> str:
    """FTS5 expression for one unit: a quoted phrase, or an OR group of inflection variants."""
    return variants_expression(unit.variants)


def variants_expression(variants: Sequence[str]) -> str:
    """A quoted spelling, or an OR group of spellings."""
    if len(variants) == 1:
        return fts_phrase(variants[0])
    return "(" + " OR ".join(fts_phrase(variant) for variant in variants) + ")"


def query_match_expression(units: Iterable[QueryUnit]) -> str:
    """Whole-query candidate expression: every unit expression joined by OR."""
    return " OR ".join(unit_match_expression(unit) for unit in units)


@functools.lru_cache(maxsize=4096)
def _token_variants(token: str) -> tuple[str, ...]:
    """``inflection_variants`` as a tuple, once per token per process (units ask every time)."""
    return tuple(inflection_variants(token))


def inflection_variants(token: str) -> list[str]:
    """Up to six English inflections of a lowercase ASCII word (itself first), each ≥3 chars."""
    if len(token) < 3 or not (token.isascii() and token.isalpha() and token.islower()):
        return [token]
    stem = inflection_stem(token)
    candidates = [
        token,
        stem,
        _plural(stem),
        _ing_form(stem),
        _ed_form(stem),
        _drop_final_e(stem) + "er",
    ]
    variants: list[str] = []
    for candidate in candidates:
        if len(candidate) >= 3 and candidate not in variants:
            variants.append(candidate)
    return variants[:MAX_INFLECTION_VARIANTS]


def inflection_stem(token: str) -> str:
    """Strip one plural or -ing/-ed suffix, following the §5.1 base-length rules."""
    if token.endswith("ies") and len(token) - 3 >= 2:
        return token[:-3] + "y"
    if token.endswith("es") and len(token) - 2 >= 3 and token[:-2].endswith(_SIBILANT_ENDINGS):
        return token[:-2]
    if token.endswith("s") and len(token) - 1 >= 3 and not token[:-1].endswith(("s", "u")):
        return token[:-1]
    for suffix in ("ing", "ed"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return _undouble(token[: -len(suffix)])
    return token


def retrieval_profile(query: str) -> RetrievalProfile:
    """Routing hints derived from the raw query (stopwords included)."""
    identifier_units = sum(1 for piece in query.split() if is_identifier_like(piece))
    intent = intent_hint(query, identifier_units)
    return RetrievalProfile(
        policy_version=PROFILE_POLICY_VERSION,
        identifier_like_units=identifier_units,
        intent_hint=intent,
        authority_hint=AUTHORITY_BY_INTENT[intent],
        script_profile=script_profile(query),
        semantic_role=SEMANTIC_ROLE,
    )


def is_identifier_like(piece: str) -> bool:
    """A whitespace piece containing `_`, `::`, `/`, or both a digit and a letter."""
    if "_" in piece or "::" in piece or "/" in piece:
        return True
    has_digit = any(char.isdigit() for char in piece)
    return has_digit and any(char.isalpha() for char in piece)


def intent_hint(query: str, identifier_like_units: int) -> str:
    """First matching intent; markers such as "where is" need the query's stopwords intact."""
    lowered = " ".join(query.lower().split())
    if any(marker in lowered for marker in HISTORICAL_MARKERS):
        return "historical_memory"
    if any(marker in lowered for marker in CURRENT_SOURCE_MARKERS):
        return "current_source"
    if identifier_like_units > 0:
        return "identifier_lookup"
    return "ambiguous"


def script_profile(text: str) -> str:
    """latin/cyrillic/arabic/cjk/other from alphabetic chars; `unknown` if none, `mixed` if >1."""
    scripts = {_script_of(char) for char in text if char.isalpha()}
    if not scripts:
        return "unknown"
    if len(scripts) > 1:
        return "mixed"
    return scripts.pop()


def _script_of(char: str) -> str:
    code = ord(char)
    if code <= 0x024F or 0x1E00 <= code <= 0x1EFF:
        return "latin"
    if 0x0400 <= code <= 0x052F:
        return "cyrillic"
    if 0x0600 <= code <= 0x06FF or 0x0750 <= code <= 0x077F or 0x08A0 <= code <= 0x08FF:
        return "arabic"
    if 0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF:
        return "cjk"
    return "other"


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _is_combining_mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


def _is_piece_char(piece: str, index: int) -> bool:
    char = piece[index]
    if _is_word_char(char) or char == "-":
        return True
    return _is_combining_mark(char) and index > 0 and _is_word_char(piece[index - 1])


def _is_stopword_unit(unit: QueryUnit) -> bool:
    return not unit.phrase and unit.display in STOPWORDS


def _is_consonant(char: str) -> bool:
    return char.isalpha() and char not in _VOWELS


def _undouble(base: str) -> str:
    if len(base) >= 2 and base[-1] == base[-2] and _is_consonant(base[-1]):
        return base[:-1]
    return base


def _doubles_final_consonant(stem: str) -> bool:
    """CVC stems (final consonant not w/x/y) double it before -ing/-ed: log → logging."""
    if len(stem) < 3:
        return False
    first, vowel, last = stem[-3], stem[-2], stem[-1]
    return (
        _is_consonant(first)
        and vowel in _VOWELS
        and _is_consonant(last)
        and last not in "wxy"
    )


def _drop_final_e(stem: str) -> str:
    return stem[:-1] if stem.endswith("e") else stem


def _plural(stem: str) -> str:
    if stem.endswith("y") and len(stem) >= 2 and _is_consonant(stem[-2]):
        return stem[:-1] + "ies"
    if stem.endswith(_SIBILANT_ENDINGS):
        return stem + "es"
    return stem + "s"


def _ing_form(stem: str) -> str:
    if stem.endswith("e"):
        return stem[:-1] + "ing"
    if _doubles_final_consonant(stem):
        return stem + stem[-1] + "ing"
    return stem + "ing"


def _ed_form(stem: str) -> str:
    if stem.endswith("e"):
        return stem + "d"
    if _doubles_final_consonant(stem):
        return stem + stem[-1] + "ed"
    return stem + "ed"
