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
// A test that edits st in place and encodes it again gets the edit: the
// JSON kept of its request and run contexts is dropped first.
func EncodeCheckpoint(st *CheckpointState) (*Checkpoint, error) {
	st.enc = checkpointCache{}
	return encodeCheckpoint(st)
}

// VerifyCheckpointEncoding makes every checkpoint encoding from now on
// check itself against json.Marshal of the state (the encoding it stands
// for) and panic on any difference. The root package's tests turn it on
// for every run they make.
func VerifyCheckpointEncoding() { verifyCheckpointEncoding.Store(true) }

// DefaultHeartbeatTTL is the default Options.HeartbeatTTL.
const DefaultHeartbeatTTL = defaultHeartbeatTTL

// ClonePlan returns a copy of p that shares no memory with it: the copy
// the runtime takes of a planner's answer. contextostest's scripted
// planner hands each turn one.
func ClonePlan(p *Plan) *Plan { return clonePlan(p) }
