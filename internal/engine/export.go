package engine

// CheckpointState is what a run's checkpoint holds, in the engine's own
// encoding (opaque to stores and hosts). DecodeCheckpoint and
// EncodeCheckpoint read and write it: the root package's tests use them to
// inspect and edit checkpoints as a crash or an older runtime would leave
// them.
type CheckpointState = checkpointState

// DecodeCheckpoint decodes a checkpoint's Data in any version this engine
// reads.
func DecodeCheckpoint(c *Checkpoint) (*CheckpointState, error) { return decodeCheckpoint(c) }

// EncodeCheckpoint encodes st as a checkpoint in the version its content
// calls for.
func EncodeCheckpoint(st *CheckpointState) (*Checkpoint, error) { return encodeCheckpoint(st) }

// DefaultHeartbeatTTL is the default Options.HeartbeatTTL.
const DefaultHeartbeatTTL = defaultHeartbeatTTL
