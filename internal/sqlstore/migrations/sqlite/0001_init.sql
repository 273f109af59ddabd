-- ContextOS durable stores, schema version 1 (SQLite).
CREATE TABLE contextos_checkpoints (
    run_id     TEXT PRIMARY KEY,
    revision   BIGINT NOT NULL,
    version    INTEGER NOT NULL,
    data       BLOB NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE contextos_packets (
    packet_id TEXT PRIMARY KEY,
    data      BLOB NOT NULL
);

CREATE TABLE contextos_records (
    seq         BIGINT PRIMARY KEY,
    record_id   TEXT NOT NULL UNIQUE,
    run_id      TEXT NOT NULL,
    tenant_id   TEXT NOT NULL,
    status      TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    record_hash TEXT NOT NULL,
    data        BLOB NOT NULL
);
CREATE INDEX contextos_records_run ON contextos_records (run_id, seq);
CREATE INDEX contextos_records_tenant ON contextos_records (tenant_id, seq);
-- The chain's head, moved in the same transaction as each append: a
-- record lost from the end of the chain fails Verify.
CREATE TABLE contextos_record_head (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    seq         BIGINT NOT NULL,
    record_hash TEXT NOT NULL
);

CREATE TABLE contextos_idempotency (
    key         TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    lease_until BIGINT NOT NULL,
    result      BLOB
);

CREATE TABLE contextos_approvals_used (
    approval_id TEXT PRIMARY KEY,
    used_at     BIGINT NOT NULL
);

CREATE TABLE contextos_transcripts (
    pos        INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    chain_hash TEXT NOT NULL,
    data       BLOB NOT NULL
);
CREATE INDEX contextos_transcripts_run ON contextos_transcripts (run_id, pos);
-- One chained entry per position of a run: two runtimes continuing one
-- run cannot fork its chain.
CREATE UNIQUE INDEX contextos_transcripts_chain ON contextos_transcripts (run_id, seq) WHERE chain_hash <> '';

CREATE TABLE contextos_memory_items (
    pos        INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id  TEXT NOT NULL,
    memory_ref TEXT NOT NULL,
    state      TEXT NOT NULL,
    data       BLOB NOT NULL,
    UNIQUE (tenant_id, memory_ref)
);
CREATE INDEX contextos_memory_items_recall ON contextos_memory_items (tenant_id, state, pos);

CREATE TABLE contextos_memory_proposals (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    data   BLOB NOT NULL
);

CREATE TABLE contextos_packs (
    pack_id      TEXT NOT NULL,
    version      TEXT NOT NULL,
    state        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    signed       INTEGER NOT NULL,
    document     BLOB NOT NULL,
    PRIMARY KEY (pack_id, version)
);
