-- ContextOS durable stores, schema version 4 (SQLite): the index of the runs
-- that await an approval, kept by every checkpoint save in its own
-- statement.

-- The tenant and the gate of the approval the checkpoint leaves its run
-- waiting for (awaiting_tenant NULL: it awaits none).
ALTER TABLE contextos_checkpoints ADD COLUMN awaiting_tenant TEXT;
ALTER TABLE contextos_checkpoints ADD COLUMN awaiting_gate TEXT NOT NULL DEFAULT '';

-- The revision the awaiting columns were written at. A checkpoint saved
-- before this version (0) or by a binary that does not keep the index is
-- at another revision: whether its run awaits an approval is not known,
-- and it is listed for the runtime to read.
ALTER TABLE contextos_checkpoints ADD COLUMN indexed_rev BIGINT NOT NULL DEFAULT 0;

CREATE INDEX contextos_checkpoints_awaiting ON contextos_checkpoints (awaiting_tenant, run_id) WHERE awaiting_tenant IS NOT NULL;
CREATE INDEX contextos_checkpoints_unindexed ON contextos_checkpoints (run_id) WHERE indexed_rev <> revision;

-- Index the checkpoints already stored, read as the runtime wrote them
-- (versions 1 to 3: a run awaits an approval when its checkpoint has a
-- "pending" request and is neither "active" nor "terminal"). A checkpoint
-- whose data is not JSON stays unindexed: the runtime reads it to see.
UPDATE contextos_checkpoints SET
    indexed_rev = revision,
    awaiting_tenant = CASE
        WHEN json_type(CAST(data AS TEXT), '$.pending') = 'object'
         AND json_type(CAST(data AS TEXT), '$.active') IS NOT 'true'
         AND json_type(CAST(data AS TEXT), '$.terminal') IS NOT 'true'
        THEN COALESCE(CAST(json_extract(CAST(data AS TEXT), '$.run_context.tenant_id') AS TEXT), '') END,
    awaiting_gate = CASE
        WHEN json_type(CAST(data AS TEXT), '$.pending') = 'object'
         AND json_type(CAST(data AS TEXT), '$.active') IS NOT 'true'
         AND json_type(CAST(data AS TEXT), '$.terminal') IS NOT 'true'
        THEN COALESCE(CAST(json_extract(CAST(data AS TEXT), '$.pending.gate_id') AS TEXT), '') ELSE '' END
WHERE version IN (1, 2, 3) AND json_valid(CAST(data AS TEXT));
