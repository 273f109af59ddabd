package playback

import (
	"fmt"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/replay"
)

// CompareTranscripts reports the first entry where got diverges from want
// (by entry kind, tool call, status, output, error code, mutations and
// policy decision; latency, attempts and transcript ids are not compared).
func CompareTranscripts(want, got []gateway.TranscriptEntry) *replay.Diff {
	n := max(len(want), len(got))
	for i := 0; i < n; i++ {
		if i >= len(want) || i >= len(got) {
			return &replay.Diff{Kind: replay.DiffToolTranscript, Step: i, Detail: fmt.Sprintf("the replay has %d transcript entries, the packet %d", len(got), len(want))}
		}
		a, b := project(want[i]), project(got[i])
		if a != b {
			return &replay.Diff{Kind: replay.DiffToolTranscript, Step: i, Detail: fmt.Sprintf("transcript step %d (%s %s) differs", i, want[i].Kind, entryCapability(want[i]))}
		}
	}
	return nil
}

func entryCapability(e gateway.TranscriptEntry) string {
	if e.Call != nil {
		return e.Call.CapabilityID
	}
	if e.Result != nil {
		return e.Result.CapabilityID
	}
	return ""
}

// project is the byte-stable part of an entry.
func project(e gateway.TranscriptEntry) string {
	var v any
	switch {
	case e.Call != nil:
		v = map[string]any{"kind": e.Kind, "call": e.Call}
	case e.Result != nil:
		r := e.Result
		code := ""
		if r.Error != nil {
			code = r.Error.Code
		}
		v = map[string]any{"kind": e.Kind, "id": r.ToolCallID, "cap": r.CapabilityID, "status": r.Status, "output": r.Output,
			"code": code, "mutations": r.Mutations, "pol": r.PolicyDecisionID, "citations": r.Citations, "risk": r.RiskTags}
	}
	h, err := canon.Digest(v)
	if err != nil {
		return "unhashable"
	}
	return h
}
