package engine

import "github.com/contextos/contextos/gateway"

// ClaimedPause is a run a runtime claimed to continue it from a pause (a
// resume with a decision saved the checkpoint Active, still naming the
// pause it answers): what a service that recorded the decision needs to
// take the run over once the claim's lease has lapsed.
type ClaimedPause struct {
	RunID, TenantID string
	// RecordID is the DEFERRED record of the pause the claim answers.
	RecordID string
	// Pending is the pause's approval request.
	Pending *gateway.ApprovalRequest
}

// ClaimedPauseOf reports the claimed pause c holds: nil when c is not an
// Active run whose resume claimed it from a pause (a paused, stopped or
// ended run, or a run claimed mid-run). It does not look at c.Lease.
func ClaimedPauseOf(c *Checkpoint) (*ClaimedPause, error) {
	st, err := decodeCheckpoint(c)
	if err != nil {
		return nil, err
	}
	if !st.Active || st.Terminal || st.Pending == nil || st.Deferred == "" {
		return nil, nil
	}
	p := &ClaimedPause{RunID: st.RunID, RecordID: st.Deferred, Pending: st.Pending}
	if st.Run != nil {
		p.TenantID = st.Run.TenantID
	}
	return p, nil
}
