-- ContextOS durable stores, schema version 4 (PostgreSQL): the index of the runs
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
-- An index on the expression rather than a partial one: PostgreSQL keeps
-- statistics of an indexed expression, so it knows how few rows match
-- (a partial index's predicate comparing two columns is estimated to
-- match nearly every row, and the table would be scanned).
CREATE INDEX contextos_checkpoints_unindexed ON contextos_checkpoints ((indexed_rev <> revision));

-- Index the checkpoints already stored, read as the runtime wrote them
-- (versions 1 to 3: a run awaits an approval when its checkpoint has a
-- "pending" request and is neither "active" nor "terminal"). A checkpoint
-- whose data is not JSON stays unindexed: the runtime reads it to see.
DO $$
DECLARE
    r RECORD;
    j jsonb;
    waits boolean;
BEGIN
    FOR r IN SELECT run_id, data FROM contextos_checkpoints WHERE version IN (1, 2, 3) LOOP
        BEGIN
            j := convert_from(r.data, 'UTF8')::jsonb;
        EXCEPTION WHEN others THEN
            CONTINUE;
        END;
        waits := jsonb_typeof(j) = 'object' AND jsonb_typeof(j -> 'pending') = 'object'
            AND (j -> 'active') IS DISTINCT FROM 'true'::jsonb
            AND (j -> 'terminal') IS DISTINCT FROM 'true'::jsonb;
        UPDATE contextos_checkpoints SET
            indexed_rev = revision,
            awaiting_tenant = CASE WHEN waits THEN COALESCE(j -> 'run_context' ->> 'tenant_id', '') END,
            awaiting_gate = CASE WHEN waits THEN COALESCE(j -> 'pending' ->> 'gate_id', '') ELSE '' END
        WHERE run_id = r.run_id;
    END LOOP;
END
$$;

-- Statistics of the new index's expression, so the planner reads the
-- index from the start rather than after the first automatic analyze.
ANALYZE contextos_checkpoints;
