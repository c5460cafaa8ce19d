"""Bounded per-process memories keyed by a text's digest."""

from __future__ import annotations

from memoree.queries.memo import DigestMemo, text_digest


class TestTextDigest:
    def test_a_text_and_its_utf8_bytes_share_one_digest(self) -> None:
        """A str is digested as its UTF-8 bytes, 16 bytes long, and other texts differ."""
        assert text_digest("café") == text_digest("café".encode()) and len(text_digest("café")) == 16
        assert text_digest("cafe") != text_digest("café")

    def test_a_lone_surrogate_is_digested_rather_than_refused(self) -> None:
        """Text decoded with surrogate escapes still gets a digest of its own."""
        assert text_digest("a\udcff") != text_digest("a")


class TestDigestMemo:
    def test_a_put_value_comes_back_and_an_unknown_key_gives_none(self) -> None:
        """What is put under a key is what ``get`` returns; nothing else is invented."""
        memo: DigestMemo[str] = DigestMemo(4)
        assert memo.put(b"k", "v") == "v" and memo.get(b"k") == "v"
        assert memo.get(b"other") is None

    def test_a_full_memory_is_cleared_not_grown(self) -> None:
        """Putting past the limit forgets the earlier entries and keeps the new one."""
        memo: DigestMemo[int] = DigestMemo(2)
        memo.put(b"a", 1)
        memo.put(b"b", 2)
        memo.put(b"c", 3)
        assert len(memo) == 1 and memo.get(b"c") == 3 and memo.get(b"a") is None
