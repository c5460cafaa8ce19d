"""Strict JSON: a document whose objects repeat a key is refused, never read as "last one wins".

Two parsers on one path (``memoree call``, the daemon, the REST front, the MCP server) could
otherwise disagree about which ``op`` or field a request carries. Standard library only: the call
client uses it, so it reads and writes JSON with the C scanner and encoder of ``_json`` that the
``json`` package itself uses, with the same settings, without importing the package: ``json``
imports ``re`` (with ``enum``, ``functools`` and ``collections``), about 15 ms of every
``memoree call`` on a 2-core machine. Whatever the fast path does not answer (a document that
is not valid JSON, bytes in UTF-16 or with a byte-order mark, an interpreter without ``_json``)
goes through ``json`` itself, so the results and the error messages are ``json``'s.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: ``typing`` is not on ``memoree call``'s import path
    from typing import Any

try:
    import _json
except ImportError:  # an interpreter without the C accelerator: ``json`` answers everything
    _json = None

__all__ = ["DuplicateKey", "dumps", "duplicate_key", "loads"]

_SPACE = " \t\n\r"  # JSON's whitespace, as ``json.decoder.WHITESPACE`` matches it


class DuplicateKey(ValueError):
    """An object in the document names the same key twice."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise DuplicateKey(f"duplicate key {key!r} in a JSON object")
        document[key] = value
    return document


class _DecoderSettings:
    """What the C scanner reads from a ``json.JSONDecoder``: its defaults, with ``_pairs``."""

    strict = True
    object_hook = None
    object_pairs_hook = staticmethod(_pairs)
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


def _not_serializable(value: object) -> object:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _make_encoder(ensure_ascii: bool) -> Any:
    """The C encoder ``json.dumps(..., separators=(",", ":"))`` builds, or None without one. A new
    one each time, as ``json`` does: its record of the containers being encoded (for the circular
    reference check) is left dirty by an encoding that failed."""
    if _json is None:
        return None
    string = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    try:
        return _json.make_encoder({}, _not_serializable, string, None, ":", ",", False, False, True)
    except TypeError:  # another interpreter's signature
        return None


_scan_once = _json.make_scanner(_DecoderSettings()) if _json is not None else None


def _as_text(data: str | bytes | bytearray) -> str | None:
    """``data`` as text where the fast path reads it as ``json`` would: UTF-8 without a BOM."""
    if isinstance(data, str):
        return None if data.startswith("\ufeff") else data
    head = bytes(data[:4])
    if b"\x00" in head or head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return None  # UTF-16 or UTF-32, or a BOM: ``json.detect_encoding``'s cases
    return bytes(data).decode("utf-8", "surrogatepass")


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads`` that raises ``DuplicateKey`` for a repeated key (``ValueError`` otherwise)."""
    text = _as_text(data) if _scan_once is not None else None
    if text is not None:
        start = len(text) - len(text.lstrip(_SPACE))
        try:
            value, end = _scan_once(text, start)
        except StopIteration:
            pass  # no value where one must start: ``json`` says so in its own words
        else:
            if not text[end:].strip(_SPACE):
                return value
    import json

    return json.loads(data, object_pairs_hook=_pairs)


def dumps(value: Any, *, ensure_ascii: bool = True) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=ensure_ascii)``."""
    encoder = _make_encoder(ensure_ascii)
    if encoder is None:
        import json

        return json.dumps(value, separators=(",", ":"), ensure_ascii=ensure_ascii)
    if isinstance(value, str):
        return (_json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring)(value)
    return "".join(encoder(value, 0))


def duplicate_key(data: str | bytes | bytearray) -> str | None:
    """The message naming the first repeated key in ``data``, or None (also for invalid JSON,
    which the caller's own parser reports)."""
    if isinstance(data, (bytes, bytearray)) and data.find(b'"') < 0:
        return None
    try:
        loads(data)
    except DuplicateKey as exc:
        return str(exc)
    except (ValueError, RecursionError):
        return None
    return None
