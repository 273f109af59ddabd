-- ContextOS durable stores, schema version 1 (PostgreSQL).
CREATE TABLE contextos_checkpoints (
    run_id     TEXT PRIMARY KEY,
    revision   BIGINT NOT NULL,
    version    INTEGER NOT NULL,
    data       BYTEA NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE contextos_packets (
    packet_id TEXT PRIMARY KEY,
    data      BYTEA NOT NULL
);

CREATE TABLE contextos_records (
    seq         BIGINT PRIMARY KEY,
    record_id   TEXT NOT NULL UNIQUE,
    run_id      TEXT NOT NULL,
    tenant_id   TEXT NOT NULL,
    status      TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    record_hash TEXT NOT NULL,
    data        BYTEA NOT NULL
);
CREATE INDEX contextos_records_run ON contextos_records (run_id, seq);
CREATE INDEX contextos_records_tenant ON contextos_records (tenant_id, seq);

CREATE TABLE contextos_idempotency (
    key         TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    lease_until BIGINT NOT NULL,
    result      BYTEA
);

CREATE TABLE contextos_approvals_used (
    approval_id TEXT PRIMARY KEY,
    used_at     BIGINT NOT NULL
);

CREATE TABLE contextos_transcripts (
    run_id TEXT NOT NULL,
    seq    BIGINT NOT NULL,
    data   BYTEA NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE contextos_memory_items (
    position BIGINT PRIMARY KEY,
    item_id  TEXT NOT NULL UNIQUE,
    data     BYTEA NOT NULL
);

CREATE TABLE contextos_memory_proposals (
    seq    BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL,
    data   BYTEA NOT NULL
);

CREATE TABLE contextos_packs (
    pack_id      TEXT NOT NULL,
    version      TEXT NOT NULL,
    position     BIGINT NOT NULL,
    state        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    signed       BOOLEAN NOT NULL,
    document     BYTEA NOT NULL,
    PRIMARY KEY (pack_id, version)
);
