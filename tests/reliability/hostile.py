"""Malformed protocol requests, generated from the ``schema`` op's JSON Schema bundle.

``valid_request`` builds a minimal valid request for any op from its input schema (required
fields only, real entity ids where a field names one); ``malformed_requests`` applies one
seeded mutation per request (a dropped required field, an unknown field, a wrong type, a
blank, oversize or out-of-range value, a broken envelope, flipped or truncated bytes), so every
request exercises one rule of the validation order. ``HAND_PICKED`` are the classic hostile
inputs, each with the error codes it may get.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from .harness import CTX

Ids = dict[str, str]

OVERSIZE = [257, 513, 1025, 4097, 8193, 65537, 131073]
EXTREME_INTS = [-1, 0, -(2**63) - 1, 2**63, 2**64, 10**30, -(10**30)]
WRONG_TYPES: list[Any] = [None, True, 7, -3.5, "text", [], {}, [1, 2], {"x": 1}]
ENVELOPE_FIELDS = ["v", "request_id", "op", "idempotency_key", "context", "context_source", "input"]


def resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _string_for(name: str, ids: Ids) -> str:
    for suffix, key in (("artifact_id", "artifact_id"), ("claim_id", "claim_id"), ("entity_id", "artifact_id"),
                        ("source_id", "artifact_id"), ("target_id", "claim_id"), ("if_revision", "revision_id"),
                        ("revision_id", "revision_id"), ("citation", "citation")):
        if name.endswith(suffix):
            return ids[key]
    return {"media_type": "text/plain", "destination": "relative/backup", "cell": "cell", "band": "band",
            "csv": "missing.csv"}.get(name, "hostile value")


def valid_value(schema: dict[str, Any], root: dict[str, Any], name: str, ids: Ids, rng: random.Random) -> Any:
    schema = resolve(schema, root)
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if resolve(s, root).get("type") != "null"]
        return valid_value(rng.choice(options), root, name, ids, rng)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return _string_for(name, ids)
    if kind == "integer":
        return 1
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return True
    if kind == "array":
        return [valid_value(schema.get("items", {}), root, name, ids, rng)] if schema.get("items") else []
    if kind == "object" or "properties" in schema:
        return {prop: valid_value(sub, root, prop, ids, rng) for prop, sub in schema.get("properties", {}).items()
                if prop in schema.get("required", [])}
    return {}


def valid_request(op: str, bundle: dict[str, Any], ids: Ids, context: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    root = bundle["operation_inputs"][op]
    document: dict[str, Any] = {"v": 1, "request_id": f"req_h{rng.randrange(10**9)}", "op": op,
                                "input": valid_value(root, root, "input", ids, rng), "context": context}
    document["idempotency_key"] = f"hostile-{rng.randrange(10**12)}"
    return document


def _objects(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    if isinstance(value, dict):
        yield path, value
        for key, item in value.items():
            yield from _objects(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _objects(item, (*path, index))


def _leaves(value: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every scalar or container field inside the input."""
    found = []
    for _, obj in _objects(value):
        found.extend((obj, key) for key in obj)
    return found


def mutate_input(document: dict[str, Any], bundle: dict[str, Any], rng: random.Random) -> str:
    """Apply one input-level mutation in place; return its name."""
    root = bundle["operation_inputs"][document["op"]]
    schema = resolve(root, root)
    leaves = _leaves(document["input"])
    choice = rng.randrange(8)
    if choice == 0 and schema.get("required"):
        del document["input"][rng.choice(schema["required"])]
        return "missing required field"
    if choice == 1:
        path, obj = rng.choice(list(_objects(document["input"])))
        obj[rng.choice(["unknown", "extra_field", "__proto__", "Input"])] = rng.choice(WRONG_TYPES)
        return "unknown field"
    if choice == 2 and leaves:
        obj, key = rng.choice(leaves)
        obj[key] = rng.choice([w for w in WRONG_TYPES if type(w) is not type(obj[key])])
        return "wrong type"
    if choice == 3 and leaves:
        obj, key = rng.choice(leaves)
        obj[key] = rng.choice(["", "   ", "\t\n"])
        return "blank string"
    if choice == 4 and leaves:
        obj, key = rng.choice(leaves)
        obj[key] = "é" * (rng.choice(OVERSIZE) // 2 + 1)
        return "oversize string"
    if choice == 5 and leaves:
        obj, key = rng.choice(leaves)
        obj[key] = rng.choice(EXTREME_INTS)
        return "extreme integer"
    if choice == 6:
        document["input"] = rng.choice([None, [], "input", 42, [document["input"]]])
        return "input not an object"
    properties = list(schema.get("properties", {}))
    if properties:
        document["input"][rng.choice(properties)] = rng.choice(WRONG_TYPES + EXTREME_INTS)
        return "any field, hostile value"
    document["input"]["unexpected"] = 1
    return "unknown field"


def mutate_envelope(document: dict[str, Any], rng: random.Random) -> str:
    choice = rng.randrange(10)
    if choice == 0:
        document.pop(rng.choice(["request_id", "op"]))
        return "envelope field missing"
    if choice == 1:
        document["request_id"] = rng.choice(["", " ", "r" * 257, 12, None])
        return "bad request_id"
    if choice == 2:
        document["op"] = rng.choice(["artifact.delete", "", "ARTIFACT.PUT", 3, None, "artifact.put "])
        return "unknown op"
    if choice == 3:
        document["v"] = rng.choice([0, 2, -1, "1", None, 1.5, 2**70])
        return "bad v"
    if choice == 4:
        document["idempotency_key"] = rng.choice(["", "   ", "k" * 513, 5, None])
        return "bad idempotency_key"
    if choice == 5:
        document.pop("context")
        return "no context"
    if choice == 6:
        document["context"] = rng.choice([{}, {"workspace_id": "w"}, {"workspace_id": "", "project_id": "p"},
                                          {"workspace_id": "w", "project_id": "p", "pins": ["x"] * 129},
                                          {"workspace_id": "w" * 257, "project_id": "p"},
                                          {"workspace_id": "w", "project_id": "p", "extra": 1}, "ctx", []])
        return "bad context"
    if choice == 7:
        document["context_source"] = rng.choice(["bogus", 1, None])
        return "bad context_source"
    if choice == 8:
        document[rng.choice(["extra", "V", "inputs"])] = 1
        return "unknown envelope field"
    document["input"] = {"horizon": "personal", "reason": "  "} if rng.random() < 0.5 else {"horizon": "galaxy"}
    return "bad horizon"


def byte_damage(raw: bytes, rng: random.Random) -> tuple[bytes, str]:
    if rng.random() < 0.5:
        return raw[: rng.randrange(len(raw))], "truncated JSON"
    data = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data), "flipped bytes"


def malformed_requests(count: int, bundle: dict[str, Any], ids: Ids, context: dict[str, Any],
                       seed: int) -> Iterator[tuple[str, bytes]]:
    """``count`` (kind, frame body) pairs, each one seeded mutation of a valid request."""
    rng = random.Random(seed)
    ops = sorted(op for op in bundle["operation_inputs"] if op != "backup.create")
    for _ in range(count):
        document = valid_request(rng.choice(ops), bundle, ids, context, rng)
        roll = rng.random()
        if roll < 0.55:
            kind = mutate_input(document, bundle, rng)
        elif roll < 0.85:
            kind = mutate_envelope(document, rng)
        else:
            raw, kind = byte_damage(json.dumps(document).encode(), rng)
            yield kind, raw
            continue
        yield kind, json.dumps(document).encode()


def _request_bytes(op: str, input_json: bytes, *, context: bytes = json.dumps(CTX).encode(),
                   v: bytes = b"1", key: bytes = b'"hostile-key"') -> bytes:
    return (b'{"v":' + v + b',"request_id":"req_hand","op":"' + op.encode() + b'","idempotency_key":' + key
            + b',"context":' + context + b',"input":' + input_json + b"}")


def _put(data_json: bytes, extra: bytes = b"") -> bytes:
    return b'{"kind":"note","title":"t","content":{"type":"text","data":' + data_json + b"}" + extra + b"}"


INVALID = ("INVALID_REQUEST",)
HAND_PICKED: list[tuple[str, bytes, tuple[str, ...]]] = [
    ("deeply nested input arrays", _request_bytes("capabilities", b"[" * 200000 + b"]" * 200000), INVALID),
    ("deeply nested provenance", _request_bytes("artifact.put", _put(b'"x"', b',"provenance":' + b'{"a":' * 3000 + b"1" + b"}" * 3000)), INVALID),
    ("deeply nested frame", b"[" * 500000 + b"]" * 500000, INVALID),
    ("5000-digit v", _request_bytes("capabilities", b"{}", v=b"9" * 5000), INVALID),
    ("5000-digit limit", _request_bytes("search", b'{"query":"q","limit":' + b"9" * 5000 + b"}"), INVALID),
    ("30-digit paging cursor", _request_bytes("artifact.history", b'{"artifact_id":"ART","before_revision_number":' + b"9" * 30 + b"}"), INVALID),
    ("30-digit relation cursor", _request_bytes("relation.list", b'{"entity_type":"artifact","entity_id":"ART","before_commit_seq":' + b"9" * 30 + b"}"), INVALID),
    ("30-digit conflict cursor", _request_bytes("conflict.list", b'{"before_case_sequence":-' + b"9" * 30 + b"}"), INVALID),
    ("30-digit claim cursor", _request_bytes("claim.history", b'{"claim_id":"CLM","before_revision_number":' + b"9" * 30 + b"}"), INVALID),
    ("30-digit min_commit_seq", _request_bytes("search", b'{"query":"q","min_commit_seq":' + b"9" * 30 + b"}"), INVALID),
    ("NaN confidence", _request_bytes("claim.assert", b'{"claim_type":"fact","statement":"s","confidence":NaN}'), INVALID),
    ("Infinity confidence", _request_bytes("claim.assert", b'{"claim_type":"fact","statement":"s","confidence":Infinity}'), INVALID),
    ("1e999 confidence", _request_bytes("claim.assert", b'{"claim_type":"fact","statement":"s","confidence":1e999}'), INVALID),
    ("duplicate keys", b'{"v":1,"request_id":"req_hand","op":"capabilities","op":"doctor","input":{}}', INVALID),
    ("duplicate input keys", _request_bytes("artifact.put", b'{"kind":"a","kind":"b","title":"t","content":{"type":"text","data":"dup"}}', key=b'"dup-key"'), INVALID),
    ("lone high surrogate", _request_bytes("artifact.put", _put(b'"\\ud800"')), INVALID),
    ("lone low surrogate", _request_bytes("artifact.put", _put(b'"x\\udc00y"')), INVALID),
    ("lone surrogate in request_id", b'{"v":1,"request_id":"\\udbff","op":"capabilities","input":{}}', INVALID),
    ("invalid UTF-8 in data", _request_bytes("artifact.put", _put(b'"\xc3\x28"')), INVALID),
    ("invalid UTF-8 in request_id", b'{"v":1,"request_id":"r\xff\xfe","op":"capabilities","input":{}}', INVALID),
    ("overlong UTF-8", _request_bytes("artifact.put", _put(b'"\xc0\xaf"')), INVALID),
    ("UTF-8 BOM prefix", b"\xef\xbb\xbf" + b'{"v":1,"request_id":"req_hand","op":"capabilities","input":{}}', ("INVALID_REQUEST", "OK")),
    ("NUL in context id", _request_bytes("artifact.put", _put(b'"x"'), context=b'{"workspace_id":"w\\u0000p","project_id":"p"}'), INVALID),
    ("NUL in task id", _request_bytes("artifact.put", _put(b'"x"'), context=b'{"workspace_id":"w","project_id":"p","task_id":"\\u0000"}'), INVALID),
    ("unknown v", _request_bytes("capabilities", b"{}", v=b"2"), ("UNSUPPORTED_VERSION",)),
    ("v as string", _request_bytes("capabilities", b"{}", v=b'"1"'), INVALID),
    ("empty frame", b"", INVALID),
    ("JSON null", b"null", INVALID),
    ("JSON string", b'"hello"', INVALID),
    ("trailing garbage", b'{"v":1,"request_id":"req_hand","op":"capabilities","input":{}} trailing', INVALID),
    ("two documents", b'{"v":1,"request_id":"a","op":"capabilities","input":{}}{"v":1}', INVALID),
    ("content over 8 MiB", _request_bytes("artifact.put", _put(b'"' + b"a" * (8 * 1024 * 1024 + 1) + b'"'), key=b'"big-key"'), ("CONTENT_TOO_LARGE",)),
    ("oversize title", _request_bytes("artifact.put", b'{"kind":"n","title":"' + b"t" * 5000 + b'","content":{"type":"text","data":"x"}}'), INVALID),
    ("oversize metadata", _request_bytes("artifact.put", _put(b'"x"', b',"provenance":{"p":"' + b"m" * 70000 + b'"}')), INVALID),
    ("129 pins", _request_bytes("search", b'{"query":"q"}', context=b'{"workspace_id":"w","project_id":"p","pins":[' + b",".join([b'"a"'] * 129) + b"]}"), INVALID),
    ("personal horizon without reason", _request_bytes("search", b'{"query":"q","horizon":"personal"}'), INVALID),
    ("relative backup destination", _request_bytes("backup.create", b'{"destination":"relative/dir"}'), INVALID),
    ("backup destination with NUL", _request_bytes("backup.create", b'{"destination":"/tmp/x\\u0000y"}'), INVALID),
]
