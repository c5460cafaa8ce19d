"""memoree.factplane.emem: the pure codec layer of the signed fact plane (emem Recall compatible).

Modules, each owning one rule set from emem-recall.md:

* ``b32``: lowercase unpadded base32.
* ``cell64``: the ~9.5 m cell id and its 65,536-symbol text form.
* ``tslot``: per-tempo time slots and their ``t.`` text form.
* ``cbor``: the exact CBOR bytes emem emits (not RFC 8949 canonical).
* ``facts``: fact structs, fact CBOR, fact_cid, typed absences, JSON view.
* ``ids``: reason/entity/bundle cids and ``emem:`` tokens.
* ``timefmt``: ``YYYY-MM-DDTHH:MM:SSZ`` timestamps and as_of normalisation.
* ``preimage``: DOMAIN/SEG/LIST building blocks of signed digests.
* ``signing``: Ed25519 over 32-byte digests.
* ``batch_merkle``: the per-attestation batch tree and proofs (v0/v1).
* ``receipts``: receipt preimages v0/v1/v2, signing, diagnostic verification.
* ``attestation``: signing a batch of facts.
* ``errors``: ``EmemError`` and its coded subclasses.

Nothing is imported here, so ``import memoree.factplane.emem.b32`` stays light.
"""
