package decision

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/contextos/contextos/runcontext"
)

// cloneRecord returns a copy of r that shares no memory with it, exactly
// as r reads back from its JSON: what a store seals and keeps is the
// record as it would be decoded, whatever Go values the caller built it
// from (an int output reads back as a float64, an empty problems list as
// none).
//
// A record whose every string is valid UTF-8, whose numbers are finite,
// whose enums are ones their decoders accept and whose outputs hold only
// the values a JSON decoding gives (strings, float64s, booleans, nil,
// []any and map[string]any) reads back as a typed deep copy with the
// same nil and empty slices and maps: that copy is made without the
// round trip. Any other record takes the round trip itself, so the
// result (or the error) is encoding/json's.
func cloneRecord(r *Record) (*Record, error) {
	if c, ok := copyRecord(r); ok {
		return c, nil
	}
	return cloneRecordJSON(r)
}

// Clone returns a copy of r that shares no memory with it, as r reads
// back from its JSON (see Seal): a runtime hands its decision store a
// clone, and keeps one of the record the store returns, so what the
// store does to either changes nothing the run records. The error is
// encoding/json's for a record with no JSON form.
func (r *Record) Clone() (*Record, error) { return cloneRecord(r) }

// cloneRecordJSON is cloneRecord through encoding/json.
func cloneRecordJSON(r *Record) (*Record, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("decision: record cannot be encoded: %w", err)
	}
	var c Record
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// copyRecord is the typed deep copy of cloneRecord; ok is false for a
// record that its JSON would not read back as itself.
func copyRecord(r *Record) (*Record, bool) {
	// The record's string lists are copied into one array, sized for them
	// all (plainCheck.strs cuts each from it, capped at its length).
	n := len(r.SubjectIDs) + len(r.EvidenceRefs) + len(r.Rationale.AlternativesConsidered)
	for _, p := range r.PolicyDecisions {
		n += len(p.RuleIDs)
	}
	ca := &r.ControlsActive
	n += len(ca.MustRefuse) + len(ca.MustEscalate) + len(ca.ApprovalGatesActive) + len(ca.RedactionRulesActive)
	v := plainCheck{ok: true, room: make([]string, 0, n)}
	c := *r
	v.str(c.RecordID, c.DecisionKey, c.DecisionVersion, c.Timestamp, string(c.Status), c.Actor.Type, c.Actor.ID,
		c.AgentIdentity.Subject, c.AgentIdentity.ClaimHash, string(c.AgentIdentity.ClaimVerification), c.IntentRef,
		c.InputsRefs.Request, c.InputsRefs.Session, c.Outcome, c.TraceID, c.RunID, c.TenantID, c.Closes,
		c.PrevRecordHash, c.RecordHash)
	var st Status
	v.ok = v.ok && st.UnmarshalText([]byte(c.Status)) == nil
	v.num(c.Confidence)
	c.SubjectIDs = v.strs(c.SubjectIDs)
	c.EvidenceRefs = v.strs(c.EvidenceRefs)
	c.AgentIdentity.PrincipalChain = copyList(c.AgentIdentity.PrincipalChain, func(p runcontext.Principal) runcontext.Principal {
		var k runcontext.PrincipalKind
		v.ok = v.ok && k.UnmarshalText([]byte(p.Kind)) == nil
		v.str(string(p.Kind), p.ID, p.TenantID, p.Display)
		return p
	})
	c.PolicyDecisions = copyList(c.PolicyDecisions, func(p PolicyDecisionRef) PolicyDecisionRef {
		v.str(p.PolicyDecisionID)
		p.RuleIDs = v.strs(p.RuleIDs)
		return p
	})
	c.Approvals = copyList(c.Approvals, func(a Approval) Approval {
		v.str(a.GateID, a.Approver, a.ApproverRole, a.EvidenceSnapshotHash, a.DecidedAt, a.ToolCallID, a.ApprovalID, string(a.Decision), a.Reason)
		m, err := runcontext.ParseApprovalMode(string(a.ApprovalModeEffective))
		v.ok = v.ok && err == nil && m == a.ApprovalModeEffective
		return a
	})
	ca = &c.ControlsActive
	ca.MustRefuse, ca.MustEscalate = v.strs(ca.MustRefuse), v.strs(ca.MustEscalate)
	ca.ApprovalGatesActive, ca.RedactionRulesActive = v.strs(ca.ApprovalGatesActive), v.strs(ca.RedactionRulesActive)
	v.str(c.Rationale.Strategy, c.Rationale.Summary)
	c.Rationale.AlternativesConsidered = v.strs(c.Rationale.AlternativesConsidered)
	v.num(c.BudgetUsage.CostUSDCents)
	l := c.Lineage
	v.str(l.PackVersion, l.PackContentHash, l.SnapshotVersion, l.CompiledContextHash, l.ToolTranscriptChainHash, l.ReplayPacketID, l.DataClassification)
	if c.Replay != nil {
		rp := *c.Replay
		v.str(rp.ReplayPacketID, rp.CompiledContextHash, rp.ToolTranscriptChainHash, rp.RecordHash, rp.LedgerHash)
		c.Replay = &rp
	}
	if c.Awaiting != nil {
		a := *c.Awaiting
		v.str(a.Kind, a.GateID, a.ApproverRole, a.ToolCallID, a.ActionDigest, a.EvidenceSnapshotHash, a.Description)
		c.Awaiting = &a
	}
	// problems is omitempty: an empty list reads back as none.
	if len(c.Problems) == 0 {
		c.Problems = nil
	} else {
		c.Problems = slices.Clone(c.Problems)
		for _, p := range c.Problems {
			v.str(p.Gate, string(p.Code), p.Path, p.Message)
		}
	}
	if c.Outputs != nil {
		c.Outputs = v.object(c.Outputs)
	}
	if !v.ok {
		return nil, false
	}
	return &c, true
}

// plainCheck accumulates whether the values it was shown read back from
// their JSON as themselves. depth is how deep in the outputs value is.
type plainCheck struct {
	ok    bool
	depth int
	// room is the array strs copies lists into.
	room []string
}

// maxCopyDepth bounds how deep outputs are copied without the round trip:
// deeper outputs (and a cycle, which has no JSON) take the round trip,
// whose encoder finds a cycle and refuses it with an error, where a
// typed copy would recurse until the goroutine's stack is exhausted (a
// fatal error). encoding/json starts looking for cycles at this depth.
const maxCopyDepth = 1000

func (v *plainCheck) str(ss ...string) {
	if !v.ok {
		return
	}
	for _, s := range ss {
		if !utf8.ValidString(s) {
			v.ok = false // encoding/json replaces each invalid byte
			return
		}
	}
}

func (v *plainCheck) num(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		v.ok = false // encoding/json refuses it
	}
}

// strs copies a string list: nil stays nil, empty stays empty. The copy
// is cut from v.room, capped at its length: appending to one list cannot
// write into another (when room is full, the copy is an array of its
// own).
func (v *plainCheck) strs(ss []string) []string {
	v.str(ss...)
	switch {
	case ss == nil:
		return nil
	case len(ss) == 0:
		return []string{}
	}
	at := len(v.room)
	v.room = append(v.room, ss...)
	return v.room[at:len(v.room):len(v.room)]
}

// object copies a JSON object as decoded into map[string]any.
func (v *plainCheck) object(m map[string]any) map[string]any {
	if !v.ok || v.depth >= maxCopyDepth {
		v.ok = false
		return nil
	}
	v.depth++
	defer func() { v.depth-- }()
	out := make(map[string]any, len(m))
	for k, x := range m {
		v.str(k)
		out[k] = v.value(x)
	}
	return out
}

// value copies a JSON value as decoded into any; anything else fails
// the check.
func (v *plainCheck) value(x any) any {
	switch x := x.(type) {
	case nil, bool:
		return x
	case string:
		v.str(x)
		return x
	case float64:
		v.num(x)
		return x
	case map[string]any:
		if x == nil {
			return nil // null reads back as nil, not as a nil map
		}
		return v.object(x)
	case []any:
		if x == nil {
			return nil
		}
		if !v.ok || v.depth >= maxCopyDepth {
			v.ok = false
			return nil
		}
		v.depth++
		defer func() { v.depth-- }()
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = v.value(e)
		}
		return out
	}
	v.ok = false
	return nil
}

// copyList copies s with f applied to each element: nil stays nil, an
// empty list stays an empty list.
func copyList[T any](s []T, f func(T) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}
