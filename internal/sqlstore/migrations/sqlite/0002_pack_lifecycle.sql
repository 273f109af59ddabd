-- ContextOS durable stores, schema version 2 (SQLite): review sign-offs and
-- per-environment pin histories of the pack registry.

-- The sign-offs recorded on a version (JSON array of {reviewer, role}).
ALTER TABLE contextos_packs ADD COLUMN reviews TEXT NOT NULL DEFAULT '[]';

-- Before version 2 a signed pack file stored for a new version landed in
-- state signed, and reviewed needed no sign-off. No version reaches signed
-- or published without a recorded review now, so a version held in
-- reviewed or signed (never published) goes back to linted and is
-- reviewed again; published and later versions keep their state.
UPDATE contextos_packs SET state = 'linted' WHERE state IN ('reviewed', 'signed');

-- One row per entry of an environment's pin history of a pack; the row
-- with the highest seq is the environment's current pin. The primary key
-- makes two writers appending the same position impossible.
CREATE TABLE contextos_pins (
    env      TEXT NOT NULL,
    pack_id  TEXT NOT NULL,
    seq      BIGINT NOT NULL,
    version  TEXT NOT NULL,
    action   TEXT NOT NULL,
    previous TEXT NOT NULL,
    reason   TEXT NOT NULL,
    at_nanos BIGINT NOT NULL,
    PRIMARY KEY (env, pack_id, seq)
);
