"""The service room: one request in, one envelope out, over one open store.

Owns the service (``service``: validation order, idempotency, dispatch), the engine (``engine``:
the one composition root that opens the log, the CAS, the projections and the command handler),
the readers that answer non-mutating ops (``readers``), discovery (``discovery``: capabilities,
instructions, schema) and which log a store uses (``logconfig``: embedded SQLite or the shared
PostgreSQL log).
"""
