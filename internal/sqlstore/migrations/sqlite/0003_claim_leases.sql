-- ContextOS durable stores, schema version 3 (SQLite): the lease of the
-- claim a checkpoint holds, and what each used approval was used for.

-- When the claim of the runtime continuing the run ends, in milliseconds
-- since the Unix epoch on the host's clock (0: the checkpoint holds no
-- claim). A takeover is refused until then.
ALTER TABLE contextos_checkpoints ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;

-- The action (a write's idempotency key) an approval was used for: the
-- same action may present it again (a takeover going on with a call its
-- dead runtime had approved), no other action may.
ALTER TABLE contextos_approvals_used ADD COLUMN action TEXT NOT NULL DEFAULT '';
