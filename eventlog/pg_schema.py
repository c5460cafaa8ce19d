"""The shared PostgreSQL log's schema: the append lock's row, events, no-op records, checkpoints,
blobs and their immutability triggers (``memoree.eventlog.postgres`` creates it once per database).

``log_head`` holds the one row whose lock is the append lock and whose ``seq`` is the dense
``commit_seq`` counter (no sequence object, so a rolled-back append leaves no gap).
"""

from __future__ import annotations

__all__ = ["PG_SCHEMA"]

PG_SCHEMA = r"""
CREATE TABLE IF NOT EXISTS log_head (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq         bigint NOT NULL CHECK (seq >= 0),
    hash        bytea NOT NULL,
    noops       bigint NOT NULL DEFAULT 0,
    checkpoints bigint NOT NULL DEFAULT 0
);
INSERT INTO log_head (singleton, seq, hash) VALUES (true, 0, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea)
    ON CONFLICT (singleton) DO NOTHING;
CREATE TABLE IF NOT EXISTS events (
    commit_seq      bigint PRIMARY KEY CHECK (commit_seq > 0),
    event_id        text NOT NULL UNIQUE,
    type            text NOT NULL,
    stream_id       text NOT NULL,
    stream_version  bigint NOT NULL CHECK (stream_version > 0),
    at              text NOT NULL,
    idempotency_key text,
    request_digest  text,
    data            bytea NOT NULL,
    prev_hash       bytea NOT NULL,
    hash            bytea NOT NULL,
    CONSTRAINT events_stream_version_unique UNIQUE (stream_id, stream_version),
    CONSTRAINT events_idempotency_key_unique UNIQUE (idempotency_key)
);
CREATE INDEX IF NOT EXISTS events_by_type ON events (type, commit_seq);
CREATE TABLE IF NOT EXISTS idempotency_noops (
    noop_seq       bigint PRIMARY KEY CHECK (noop_seq > 0),
    key            text NOT NULL CONSTRAINT idempotency_noops_key_unique UNIQUE,
    request_digest text NOT NULL,
    operation      text NOT NULL,
    commit_seq     bigint NOT NULL REFERENCES events (commit_seq),
    result_json    bytea NOT NULL,
    recorded_at    text NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    checkpoint_seq bigint PRIMARY KEY CHECK (checkpoint_seq > 0),
    tree_size      bigint NOT NULL UNIQUE,
    root           bytea NOT NULL,
    key_epoch      bigint NOT NULL,
    signed_at      text NOT NULL,
    note           bytea NOT NULL,
    signature      bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS blobs (
    hash text PRIMARY KEY,
    size bigint NOT NULL CHECK (size >= 0),
    data bytea NOT NULL
);
CREATE OR REPLACE FUNCTION memoree_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'rows of % are immutable', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END
$$;
CREATE OR REPLACE TRIGGER events_immutable BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION memoree_refuse_change();
CREATE OR REPLACE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION memoree_refuse_change();
CREATE OR REPLACE TRIGGER idempotency_noops_immutable BEFORE UPDATE OR DELETE ON idempotency_noops
    FOR EACH ROW EXECUTE FUNCTION memoree_refuse_change();
CREATE OR REPLACE TRIGGER checkpoints_immutable BEFORE UPDATE OR DELETE ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION memoree_refuse_change();
-- The head row as a fresh snapshot sees it (a VOLATILE function's query takes its own): called
-- after a one-statement append's guarded move, it reports a head another session committed while
-- that move waited for the row, which the statement's own snapshot, taken before, cannot see.
CREATE OR REPLACE FUNCTION memoree_head_now(after_move boolean)
    RETURNS TABLE (seq bigint, noops bigint, checkpoints bigint, hash bytea)
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN QUERY SELECT h.seq, h.noops, h.checkpoints, h.hash FROM log_head h WHERE h.singleton;
END
$$;
CREATE TABLE IF NOT EXISTS log_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
"""
