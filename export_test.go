package contextos

// CheckpointState, DecodeCheckpoint and EncodeCheckpoint let the external
// tests read and edit what a run's checkpoint holds (the runtime's own
// encoding, opaque to stores and hosts).
type CheckpointState = checkpointState

func DecodeCheckpoint(c *Checkpoint) (*CheckpointState, error) { return decodeCheckpoint(c) }

func EncodeCheckpoint(st *CheckpointState) (*Checkpoint, error) { return encodeCheckpoint(st) }

// DefaultHeartbeatTTL is the default Options.HeartbeatTTL.
const DefaultHeartbeatTTL = defaultHeartbeatTTL
