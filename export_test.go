package contextos

import "github.com/contextos/contextos/internal/engine"

// CheckpointState, DecodeCheckpoint and EncodeCheckpoint let the external
// tests read and edit what a run's checkpoint holds (the runtime's own
// encoding, opaque to stores and hosts).
type CheckpointState = engine.CheckpointState

func DecodeCheckpoint(c *Checkpoint) (*CheckpointState, error) { return engine.DecodeCheckpoint(c) }

func EncodeCheckpoint(st *CheckpointState) (*Checkpoint, error) { return engine.EncodeCheckpoint(st) }

// VerifyCheckpointEncoding makes every checkpoint the runtime encodes
// check itself against json.Marshal of its state (TestMain turns it on).
func VerifyCheckpointEncoding() { engine.VerifyCheckpointEncoding() }

// DefaultHeartbeatTTL is the default Options.HeartbeatTTL.
const DefaultHeartbeatTTL = engine.DefaultHeartbeatTTL
