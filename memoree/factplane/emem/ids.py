"""Short content ids and tokens derived from text preimages.

Owns blake3 hashing helpers and the ids that are *not* a full fact body:
reason_cid (absence evidence), entity_cid, bundle_cid (16 bytes, 26
characters each), cid64 (display only, 8 bytes) and the ``emem:`` tokens.
bundle_cid hashes a ``|``/newline text preimage, not CBOR.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import blake3

from memoree.factplane.emem import b32
from memoree.factplane.emem.errors import InvalidArgument

SHORT_CID_BYTES = 16
CID64_BYTES = 8
ENTITY_PREFIX = "emem.entity.v1|"
BUNDLE_PREFIX = "emem.memory_bundle.v1|"
# Strongest identity first; the first one present names the entity.
EXTERNAL_ID_PRIORITY = ("gers", "osm", "wikidata", "anchor")

# Unicode White_Space, which Rust's trim/split_whitespace use. Python's
# str.split() also splits on U+001C..U+001F, which Rust does not.
_WHITESPACE_RUN = re.compile(
    "[\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
)

TOKEN_KINDS = ("fact", "bundle", "entity")
_LEGACY_TOKEN_PREFIXES = {"memt": "fact", "memb": "bundle", "meme": "entity"}


class Citation(NamedTuple):
    cell: str
    band: str
    resolved_tslot: int
    fact_cid: str | None = None


class Token(NamedTuple):
    kind: str
    cid: str
    cell: str | None = None  # fact tokens only


def blake3_digest(data: bytes) -> bytes:
    """The 32-byte blake3 digest of ``data``."""
    return blake3.blake3(data).digest()


def short_cid(data: bytes) -> str:
    """base32 of the first 16 bytes of blake3(data): 26 characters."""
    return b32.encode(blake3_digest(data)[:SHORT_CID_BYTES])


def cid64(digest: bytes) -> str:
    """Display-only 13-character form of a digest (its first 8 bytes)."""
    return b32.encode(bytes(digest)[:CID64_BYTES])


def reason_cid(reason_text: str) -> str:
    """The cid an absence carries for its reason text, e.g. ``"outside_coverage: ..."``."""
    return short_cid(reason_text.encode("utf-8"))


def normalise_label(text: str) -> str:
    """Trim, Unicode-lowercase and collapse whitespace runs to one space."""
    return _WHITESPACE_RUN.sub(" ", text).strip(" ").lower()


def best_external_id(external_ids: Mapping[str, str]) -> str | None:
    """``"<scheme>:<id>"`` for the strongest non-empty external id.

    Priority: gers > osm > wikidata > anchor.
    """
    for scheme in EXTERNAL_ID_PRIORITY:
        ident = external_ids.get(scheme)
        if ident:
            return f"{scheme}:{ident}"
    return None


def entity_cid(
    *,
    cell: str,
    kind: str,
    label: str,
    external_ids: Mapping[str, str] | None = None,
) -> str:
    """An entity id: from its best external id if any, else from location + kind + label."""
    external = best_external_id(external_ids or {})
    if external is not None:
        preimage = f"{ENTITY_PREFIX}ext|{external}"
    else:
        preimage = f"{ENTITY_PREFIX}loc|{cell}|{normalise_label(kind)}|{normalise_label(label)}"
    return short_cid(preimage.encode("utf-8"))


def bundle_preimage(citations: Iterable[Citation], purpose: str | None = None) -> str:
    """The text a bundle_cid hashes: a header line then one line per citation."""
    lines = [f"{BUNDLE_PREFIX}{purpose or ''}\n"]
    for citation in citations:
        lines.append(
            f"{citation.cell}|{citation.band}|{int(citation.resolved_tslot)}"
            f"|{citation.fact_cid or ''}\n"
        )
    return "".join(lines)


def bundle_cid(citations: Iterable[Citation], purpose: str | None = None) -> str:
    """The id of a memory bundle: 16-byte blake3 of :func:`bundle_preimage`."""
    return short_cid(bundle_preimage(citations, purpose).encode("utf-8"))


def fact_token(cell: str, fact_cid: str) -> str:
    return f"emem:fact:{cell}:{fact_cid}"


def bundle_token(bundle_cid: str) -> str:
    return f"emem:bundle:{bundle_cid}"


def entity_token(entity_cid: str) -> str:
    return f"emem:entity:{entity_cid}"


def parse_token(token: str) -> Token:
    """Parse ``emem:fact:<cell>:<cid>``, ``emem:bundle:<cid>``, ``emem:entity:<cid>``.

    The legacy prefixes ``memt:``, ``memb:``, ``meme:`` stand for
    ``emem:fact:``, ``emem:bundle:``, ``emem:entity:``. Shapes of the parts
    are not checked here.
    """
    if not isinstance(token, str):
        raise InvalidArgument("a token must be a string")
    head, _, rest = token.partition(":")
    if head == "emem":
        kind, _, rest = rest.partition(":")
    else:
        kind = _LEGACY_TOKEN_PREFIXES.get(head, "")
    if kind not in TOKEN_KINDS or not rest:
        raise InvalidArgument(f"unrecognised token {token!r}")
    if kind == "fact":
        cell, _, cid = rest.rpartition(":")
        if not cell or not cid:
            raise InvalidArgument(f"a fact token needs <cell64>:<fact_cid>, got {token!r}")
        return Token(kind, cid, cell)
    if ":" in rest:
        raise InvalidArgument(f"unrecognised token {token!r}")
    return Token(kind, rest)
