"""The event log layer: the one authoritative record, and everything that only the log needs.

Owns the event types (msgspec tagged Structs with stable dotted names, ``events``), the one
canonical codec whose stored bytes are what the chain hashes (``codec``), the store interface and
its backends (``store``; ``sqlite`` embedded, ``postgres`` shared, with its DDL in
``pg_schema``), the content-addressed blob store (``cas``), connection setup (``db``), the
RFC 9162 Merkle tree, signed checkpoints, sealing
and proofs (``merkle``, ``checkpoints``, ``sealing``), node keys (``keys``), scope predicates on
an event's owner (``scope``), and the scale-out side of a shared PostgreSQL log: the host's
verified replica and catch-up (``replica``), the store the engine uses (``shared``), the
background follower (``follower``) and ``log migrate`` (``migrate``). It imports only the kernel
(``memoree.errors``, ``limits``, ``ids``, ``log``); projections reach it through ``EventSink``.
"""
