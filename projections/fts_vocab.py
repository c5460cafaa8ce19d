"""Owner scopes and the word vocabulary of the full-text projection.

This module owns two things retrieval needs to rank a query by what the caller's horizon holds,
never by other workspaces' data:

* **Scope tokens.** Every indexed document carries, in an extra FTS5 column, opaque tokens naming
  its owner's workspace, project, and task (or "no task"), so one MATCH can be confined to a
  horizon (``scope : "p…"``) and FTS5 intersects the posting lists itself. A per-(table, scope)
  document count makes horizon-scoped IDF a lookup.
* **The vocabulary.** Every word (3..32 characters, folded as the word tokenizer folds it) of every
  indexed text, per scope token and once store-wide, plus each word's one-character deletions
  (a symmetric-deletion index). The typo channel finds words one edit away, and words that
  extend an abbreviation, with index lookups instead of edit distance over documents. A deletion
  in a word's second half is stored as it is (the word's deletions there share its first half, so
  they sit on one b-tree leaf); one in its first half is stored reversed behind a marker no word
  holds (those share the word's reversed second half): a new word writes about two leaf pages of
  the index instead of one per deletion position. ``deletion_lookup_keys`` asks both forms, so
  a look-up finds exactly the words whose deletions hold a key.

Everything here is written inside the mutation's transaction by the fts projector; reads only
look rows up. A purge removes the purged words that no longer occur in any index.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
from blake3 import blake3

__all__ = [
    "GLOBAL_SCOPE", "MAX_VOCAB_WORD", "MIN_VOCAB_WORD", "REVERSED_KEY", "VOCAB_SCHEMA", "add_scope_doc",
    "add_scope_docs",
    "deletion_lookup_keys", "deletions", "fold", "forget_words", "index_word_set", "index_words",
    "owner_scope_tokens", "remove_scope_words", "scope_token", "stored_deletion_keys", "word_count",
    "words_and_count", "words_of",
]

MIN_VOCAB_WORD = 3
MAX_VOCAB_WORD = 32
GLOBAL_SCOPE = ""
# Marks a deletion key stored reversed: a control character, never part of a vocabulary word.
REVERSED_KEY = "\x01"
_WORD = re.compile(r"[^\W_]+")
# For ASCII text the pattern's words are the runs of ASCII letters and digits: every other byte
# becomes a space and ``split`` finds the runs, in C, about ten times faster than the pattern.
_ASCII_NON_WORD_TO_SPACE = bytes(
    byte if chr(byte).isascii() and chr(byte).isalnum() else 0x20 for byte in range(256))

VOCAB_SCHEMA = """
CREATE TABLE IF NOT EXISTS search_scope_docs (
    tbl TEXT NOT NULL,
    scope TEXT NOT NULL,
    docs INTEGER NOT NULL,
    words INTEGER NOT NULL,
    PRIMARY KEY (tbl, scope)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS search_terms (
    scope TEXT NOT NULL,
    term TEXT NOT NULL,
    PRIMARY KEY (term, scope)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS search_term_deletions (
    deletion TEXT NOT NULL,
    term TEXT NOT NULL,
    PRIMARY KEY (deletion, term)
) STRICT, WITHOUT ROWID;
"""


def _digest(*parts: str) -> str:
    return blake3("\0".join(parts).encode("utf-8")).hexdigest()[:20]


def scope_token(kind: str, *parts: str) -> str:
    """An opaque, tokenizer-safe token: ``w`` workspace, ``p`` project, ``n`` project-level
    (no task), ``t`` one task. Letters and hex digits only, so unicode61 keeps it whole."""
    return kind + _digest(kind, *parts)


def owner_scope_tokens(workspace_id: str, project_id: str, task_id: str | None) -> list[str]:
    """The scope tokens of a document owned by this context (a fresh list: callers may keep it)."""
    return list(_owner_scope_tokens(workspace_id, project_id, task_id))


@functools.lru_cache(maxsize=4096)
def _owner_scope_tokens(workspace_id: str, project_id: str, task_id: str | None) -> tuple[str, ...]:
    tokens = [scope_token("w", workspace_id), scope_token("p", workspace_id, project_id)]
    if task_id is None:
        tokens.append(scope_token("n", workspace_id, project_id))
    else:
        tokens.append(scope_token("t", workspace_id, project_id, task_id))
    return tuple(tokens)


@functools.lru_cache(maxsize=1 << 16)
def fold(word: str) -> str:
    """Lower-case without accents, as ``unicode61 remove_diacritics 2`` compares words."""
    if word.isascii():
        return word.lower()
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def words_of(text: str) -> set[str]:
    """The distinct vocabulary words of ``text`` (folded, 3..32 characters)."""
    return _vocabulary(_tokens(text), text.isascii())


def words_and_count(text: str) -> tuple[set[str], int]:
    """``words_of(text)`` and ``word_count(text)`` from one pass of the word pattern."""
    tokens = _tokens(text)
    return _vocabulary(tokens, text.isascii()), len(tokens)


def _tokens(text: str) -> list[str]:
    # Folding ASCII is lower-casing, which keeps every word's bounds and length: one call over
    # the whole text instead of one per word.
    if text.isascii():
        return _ascii_words(text.lower())
    return _WORD.findall(text)


def _ascii_words(text: str) -> list[str]:
    """``_WORD.findall(text)`` for an ASCII ``text`` (the same words, in order)."""
    return text.encode("ascii").translate(_ASCII_NON_WORD_TO_SPACE).decode("ascii").split()


def _vocabulary(tokens: list[str], folded: bool) -> set[str]:
    distinct = set(tokens)  # in C: the length test and folding then run once per distinct word
    if folded:
        return {w for w in distinct if MIN_VOCAB_WORD <= len(w) <= MAX_VOCAB_WORD}
    return {fold(w) for w in distinct if MIN_VOCAB_WORD <= len(w) <= MAX_VOCAB_WORD}


def deletions(word: str) -> set[str]:
    """Every string one character shorter than ``word`` (the symmetric-deletion keys)."""
    return {word[:i] + word[i + 1:] for i in range(len(word))}


def stored_deletion_keys(word: str) -> set[str]:
    """The keys under which ``word``'s deletions are stored: a deletion of a character in the
    second half as it is, one in the first half reversed behind ``REVERSED_KEY``."""
    half = len(word) // 2
    return ({word[:i] + word[i + 1:] for i in range(half, len(word))}
            | {REVERSED_KEY + (word[:i] + word[i + 1:])[::-1] for i in range(half)})


def deletion_lookup_keys(keys: Iterable[str]) -> list[str]:
    """The stored keys to ask for deletion strings ``keys``: each as it is and reversed."""
    return sorted({form for key in keys for form in (key, REVERSED_KEY + key[::-1])})


def word_count(text: str) -> int:
    """How many word tokens ``text`` holds (its BM25 length)."""
    return len(_ascii_words(text) if text.isascii() else _WORD.findall(text))


def add_scope_doc(conn: Any, table: str, scopes: Iterable[str], words: int) -> None:
    """Count one more document of ``table``, and its words, in each scope (and store-wide)."""
    add_scope_docs(conn, table, {scope: (1, words) for scope in (GLOBAL_SCOPE, *scopes)})


def add_scope_docs(conn: Any, table: str, counts: Mapping[str, tuple[int, int]]) -> None:
    """Count ``(documents, words)`` more of ``table`` in each scope named (GLOBAL_SCOPE included
    where the caller counted it): a batch of documents adds its sums in one row per scope."""
    conn.executemany(
        "INSERT INTO search_scope_docs (tbl, scope, docs, words) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(tbl, scope) DO UPDATE SET docs = docs + excluded.docs, words = words + excluded.words",
        [(table, scope, docs, words) for scope, (docs, words) in counts.items()],
    )


def index_words(conn: Any, scopes: Sequence[str], text: str) -> None:
    """Add the words of ``text`` to the vocabulary of each scope and store-wide."""
    index_word_set(conn, scopes, words_of(text))


def index_word_set(conn: Any, scopes: Sequence[str], found: Iterable[str]) -> None:
    """Add vocabulary words (as ``words_of`` yields them) to each scope and store-wide.

    ``scopes`` are a document's owner tokens as ``owner_scope_tokens`` lists them, broadest first.
    Every text of the narrowest scope (the task, or the project's task-less part) is a text of
    each broader scope and of the store, and a purge forgets a word from a scope only when no
    text of it holds the word any more: so a word the narrowest scope knows, every broader one
    knows too. One look-up per word in that scope leaves the few words it lacks, and only those
    need their rows checked and added in every scope (about a quarter of the look-ups)."""
    words = sorted(found)
    if not words:
        return
    if scopes:
        words = [row[0] for row in conn.execute(
            "SELECT w.value FROM json_each(?) AS w WHERE NOT EXISTS "
            "(SELECT 1 FROM search_terms WHERE term = w.value AND scope = ?)",
            (_json_text(words), scopes[-1]))]
        if not words:
            return
    # One statement over JSON arrays instead of a row per (scope, word): SQLite walks the pairs
    # itself, in the table's (term, scope) order. RETURNING yields only the rows it inserted, so
    # the store-wide ones are exactly the words the store did not know yet.
    inserted = conn.execute("INSERT OR IGNORE INTO search_terms (scope, term) "
                            "SELECT s.value, w.value FROM json_each(?) AS w, json_each(?) AS s "
                            "RETURNING scope, term",
                            (_json_text(words), _json_text([GLOBAL_SCOPE, *scopes]))).fetchall()
    new = sorted(term for scope, term in inserted if scope == GLOBAL_SCOPE)
    if new:
        # In key order across all the new words (a group brings thousands of rows): each insert
        # lands on or beside the leaf the one before it walked to, not on a random page.
        conn.executemany("INSERT OR IGNORE INTO search_term_deletions (deletion, term) VALUES (?, ?)",
                         sorted([(d, w) for w in new for d in stored_deletion_keys(w)]))


def _json_text(values: Sequence[str]) -> str:
    return msgspec.json.encode(values).decode("utf-8")


def forget_words(conn: Any, text: str, scopes: Sequence[str], still_indexed: Any) -> None:
    """After a purge: drop the purged text's words from each of its scopes (and store-wide)
    where ``still_indexed(word, scope)`` says no indexed text of that scope (None: of the store)
    holds them any more, so the vocabulary is what a replay of the log would build."""
    words = sorted(words_of(text))
    for scope in scopes:
        conn.executemany("DELETE FROM search_terms WHERE scope = ? AND term = ?",
                         [(scope, w) for w in words if not still_indexed(w, scope)])
    gone = [w for w in words if not still_indexed(w, None)]
    conn.executemany("DELETE FROM search_terms WHERE scope = '' AND term = ?", [(w,) for w in gone])
    conn.executemany("DELETE FROM search_term_deletions WHERE deletion = ? AND term = ?",
                     [(d, w) for w in gone for d in stored_deletion_keys(w)])


def remove_scope_words(conn: Any, table: str, scopes: Iterable[str], words: int) -> None:
    """A purged body's words leave the BM25 lengths of its scopes (and store-wide)."""
    conn.executemany("UPDATE search_scope_docs SET words = words - ? WHERE tbl = ? AND scope = ?",
                     [(words, table, scope) for scope in (GLOBAL_SCOPE, *scopes)])
