#!/usr/bin/env python3
"""Standalone verifier for a memoree log export: an auditor needs only this file and the key.

    python verify_log.py EXPORT.ndjson --pubkey KEY [--since CHECKPOINT.json]

KEY is the node's public key exactly as ``memoree capabilities`` reports it (base32, lowercase,
no padding). Uses the standard library plus ``blake3`` and ``pynacl`` only; imports nothing from
memoree. It recomputes every event hash (``blake3(prev_hash || stored bytes)``), the density of
``commit_seq``, every checkpoint's RFC 9162 root (BLAKE3, leaf 0x00 over the event hash, node
0x01) and its Ed25519 signature under the key epoch the log recorded. With ``--since`` it checks,
by an RFC 9162 consistency proof, that the newest checkpoint extends an earlier trusted one (a
JSON object with ``tree_size`` and ``root`` in hex, e.g. one entry of ``memoree log
checkpoints``). Prints a JSON report; exits 0 only when everything verifies, 1 on the first
discrepancy, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from blake3 import blake3
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey


class Discrepancy(Exception):
    def __init__(self, where: str, message: str, commit_seq: int | None = None) -> None:
        super().__init__(message)
        self.where, self.message, self.commit_seq = where, message, commit_seq


def h(data: bytes) -> bytes:
    return blake3(data).digest()


def leaf(event_hash: bytes) -> bytes:
    return h(b"\x00" + event_hash)


def node(left: bytes, right: bytes) -> bytes:
    return h(b"\x01" + left + right)


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 Merkle tree hash over leaf hashes (iterative, largest power of two split)."""
    if not leaves:
        return h(b"")
    level = list(leaves)
    # Bottom-up pairing with a carried odd node gives the RFC shape for every size.
    while len(level) > 1:
        paired = [node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def subproof(m: int, leaves: list[bytes], complete: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if complete else [mth(leaves)]
    k = split(n)
    if m <= k:
        return subproof(m, leaves[:k], complete) + [mth(leaves[k:])]
    return subproof(m - k, leaves[k:], False) + [mth(leaves[:k])]


def verify_consistency(old_size: int, new_size: int, proof: list[bytes], old_root: bytes, new_root: bytes) -> bool:
    """RFC 9162 section 2.1.4.2."""
    if old_size == new_size:
        return not proof and old_root == new_root
    if old_size == 0 or old_size > new_size:
        return False
    if old_size & (old_size - 1) == 0:
        proof = [old_root] + proof
    if not proof:
        return False
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node(c, fr), node(c, sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = node(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


def b32decode(text: str) -> bytes:
    return base64.b32decode(text.upper() + "=" * (-len(text) % 8))


def parse_note(note: bytes) -> dict[str, Any]:
    lines = note.decode("utf-8").split("\n")
    if len(lines) != 6 or lines[5] != "" or not lines[3].startswith("key-epoch ") or not lines[4].startswith("time "):
        raise ValueError("malformed note")
    return {"origin": lines[0], "tree_size": int(lines[1]), "root": base64.b64decode(lines[2]),
            "key_epoch": int(lines[3][10:]), "signed_at": lines[4][5:]}


def check_events(events: list[dict[str, Any]]) -> tuple[list[bytes], dict[int, str]]:
    hashes: list[bytes] = []
    keys: dict[int, str] = {}
    prev = bytes(32)
    for expected, line in enumerate(events, start=1):
        seq = line.get("commit_seq")
        if seq != expected:
            raise Discrepancy("event", f"commit_seq gap: expected {expected}, found {seq}", expected)
        data = base64.b64decode(line["data"])
        if bytes.fromhex(line["prev_hash"]) != prev:
            raise Discrepancy("event", "prev_hash does not match the previous event's hash", seq)
        digest = h(prev + data)
        if digest != bytes.fromhex(line["hash"]):
            raise Discrepancy("event", "hash does not match the stored bytes", seq)
        try:
            envelope = json.loads(data)
        except ValueError:
            raise Discrepancy("event", "stored bytes are not a JSON event", seq) from None
        if envelope.get("commit_seq") != seq or envelope.get("type") != line.get("type"):
            raise Discrepancy("event", "stored bytes name another position or type", seq)
        if envelope["type"] == "key.epoch_started":
            keys[envelope["payload"]["epoch"]] = envelope["payload"]["public_key"]
        hashes.append(digest)
        prev = digest
    return hashes, keys


def check_checkpoints(checkpoints: list[dict[str, Any]], hashes: list[bytes], keys: dict[int, str]) -> list[bytes]:
    leaves = [leaf(x) for x in hashes]
    origin = f"memoree/{keys[min(keys)][:16]}/blake3-rfc9162" if keys else None
    for expected, cp in enumerate(checkpoints, start=1):
        if cp["checkpoint_seq"] != expected:
            raise Discrepancy("checkpoint", f"checkpoint numbers are not dense at {expected}")
        size = cp["tree_size"]
        if size > len(hashes):
            raise Discrepancy("checkpoint", f"checkpoint {expected} covers {size} events but the export holds {len(hashes)}", len(hashes) + 1)
        root = bytes.fromhex(cp["root"])
        if mth(leaves[:size]) != root:
            raise Discrepancy("checkpoint", f"checkpoint {expected} root does not match the events it covers", size)
        note = base64.b64decode(cp["note"])
        try:
            fields = parse_note(note)
        except ValueError:
            raise Discrepancy("checkpoint", f"checkpoint {expected} note is malformed", size) from None
        if (fields["tree_size"], fields["root"], fields["key_epoch"], fields["origin"]) != (size, root, cp["key_epoch"], origin):
            raise Discrepancy("checkpoint", f"checkpoint {expected} note disagrees with its record", size)
        public = keys.get(cp["key_epoch"])
        if public is None:
            raise Discrepancy("signature", f"checkpoint {expected} names key epoch {cp['key_epoch']}, never recorded in the log", size)
        try:
            VerifyKey(b32decode(public)).verify(note, base64.b64decode(cp["signature"]))
        except (BadSignatureError, ValueError):
            raise Discrepancy("signature", f"checkpoint {expected} signature does not verify under key epoch {cp['key_epoch']}", size) from None
    return leaves


def check_since(trusted: dict[str, Any], checkpoints: list[dict[str, Any]], leaves: list[bytes]) -> None:
    if not checkpoints:
        raise Discrepancy("since", "the export has no checkpoint to compare with the trusted one")
    newest = checkpoints[-1]
    old_size, new_size = int(trusted["tree_size"]), newest["tree_size"]
    if old_size > new_size:
        raise Discrepancy("since", f"the log shrank: trusted size {old_size}, newest checkpoint {new_size}", new_size + 1)
    proof = subproof(old_size, leaves[:new_size], True) if 0 < old_size < new_size else []
    if not verify_consistency(old_size, new_size, proof, bytes.fromhex(trusted["root"]), bytes.fromhex(newest["root"])):
        raise Discrepancy("since", f"the newest checkpoint does not extend the trusted one of size {old_size}: the log was rewritten", old_size)


def verify(lines: list[dict[str, Any]], pubkey: str, since: dict[str, Any] | None) -> dict[str, Any]:
    events = [x for x in lines if x.get("kind") == "event"]
    checkpoints = [x for x in lines if x.get("kind") == "checkpoint"]
    hashes, keys = check_events(events)
    if pubkey not in keys.values():
        raise Discrepancy("key", "the given public key is not among the key epochs this log recorded")
    leaves = check_checkpoints(checkpoints, hashes, keys)
    if since is not None:
        check_since(since, checkpoints, leaves)
    sealed = checkpoints[-1]["tree_size"] if checkpoints else 0
    return {"ok": True, "events": len(events), "checkpoints": len(checkpoints), "key_epochs": sorted(keys),
            "unsealed_events": len(events) - sealed, "consistent_since": since["tree_size"] if since else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Verify a memoree log export with nothing but the public key.")
    parser.add_argument("export")
    parser.add_argument("--pubkey", required=True, help="the node public key (base32, lowercase, no padding)")
    parser.add_argument("--since", help="JSON file of an earlier trusted checkpoint (tree_size, root)")
    args = parser.parse_args(argv)
    try:
        with open(args.export, encoding="utf-8") as handle:
            lines = [json.loads(line) for line in handle if line.strip()]
        since = json.load(open(args.since, encoding="utf-8")) if args.since else None
    except (OSError, ValueError) as exc:
        print(json.dumps({"ok": False, "error": f"cannot read input: {exc}"}))
        return 2
    try:
        report = verify(lines, args.pubkey, since)
    except Discrepancy as exc:
        print(json.dumps({"ok": False, "where": exc.where, "first_bad_commit_seq": exc.commit_seq, "problem": exc.message}))
        return 1
    except (KeyError, TypeError, ValueError) as exc:
        print(json.dumps({"ok": False, "where": "format", "problem": f"malformed export: {exc}"}))
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
