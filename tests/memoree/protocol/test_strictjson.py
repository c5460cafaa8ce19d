"""Strict JSON reads and writes what ``json`` does, refuses a repeated key, and errs as ``json`` errs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoree.protocol import strictjson

VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                      lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=30)


def outcome(parse, data: object) -> tuple[str, str]:
    try:
        return "ok", json.dumps(parse(data))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


class TestStrictJson:
    @settings(max_examples=300)
    @given(VALUES, st.booleans())
    def test_dumps_writes_what_compact_json_dumps_writes(self, value: object, ensure_ascii: bool) -> None:
        """``dumps`` gives the bytes of ``json.dumps`` with compact separators, for any JSON value."""
        expected = json.dumps(value, separators=(",", ":"), ensure_ascii=ensure_ascii)
        assert expected == strictjson.dumps(value, ensure_ascii=ensure_ascii)

    @settings(max_examples=300)
    @given(VALUES, st.sampled_from([None, 2]), st.booleans())
    def test_loads_reads_what_json_loads_reads(self, value: object, indent: int | None, as_bytes: bool) -> None:
        """``loads`` reads any document ``json`` writes, as text or UTF-8 bytes, padded or not."""
        text = " \n" + json.dumps(value, indent=indent, ensure_ascii=False) + "\t "
        data = text.encode("utf-8", "surrogatepass") if as_bytes else text
        assert outcome(json.loads, data) == outcome(strictjson.loads, data)

    @pytest.mark.parametrize("data", ["", " ", "{", "[1,]", "1 2", "nul", '{"a": NaN}', "\ufeff{}",
                                      b"\xef\xbb\xbf{}", b"\xff", '"\\ud800"', "[" * 100_000,
                                      '{"a": 1}'.encode("utf-16")])
    def test_odd_and_invalid_documents_read_or_fail_as_json_does(self, data: str | bytes) -> None:
        """Invalid JSON, a BOM, UTF-16, bad UTF-8 and deep nesting give ``json``'s value or error."""
        assert outcome(json.loads, data) == outcome(strictjson.loads, data)

    def test_a_repeated_key_is_refused_at_any_depth(self) -> None:
        """A key named twice in one object, nested or not, raises DuplicateKey."""
        for document in ('{"op": "a", "op": "b"}', b'{"input": {"k": 1, "k": 2}}'):
            with pytest.raises(strictjson.DuplicateKey):
                strictjson.loads(document)

    def test_a_failed_encoding_leaves_the_next_one_clean(self) -> None:
        """An unserializable value raises TypeError, a cycle ValueError, and a later dumps works."""
        shared: list[object] = []
        with pytest.raises(TypeError):
            strictjson.dumps([shared, object()])
        cycle: list[object] = []
        cycle.append(cycle)
        with pytest.raises(ValueError, match="Circular"):
            strictjson.dumps(cycle)
        assert '[[],[]]' == strictjson.dumps([shared, shared])
