package gateway_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// TestEnvelopesAppendCanonical: the envelopes' hand-written canonical
// writers give the general encoder's bytes for the shapes calls never
// produce (every call a test makes is checked by the fixture's sink).
func TestEnvelopesAppendCanonical(t *testing.T) {
	s := func(v string) *string { return &v }
	yes := true
	cases := []struct {
		name    string
		v       canon.Appender
		wantErr bool
	}{
		{"zero call", &gateway.ToolCallEnvelope{}, false},
		{"zero result", &gateway.ToolResultEnvelope{}, false},
		{"full call", &gateway.ToolCallEnvelope{EnvelopeVersion: gateway.CallEnvelopeVersion, ToolCallID: "tool_1", RunID: "run_1", TraceID: "t", SessionID: "s",
			CapabilityID: "a.b", Args: map[string]any{"z": 1.5, "a": []any{"<&>", nil, true}, "é": map[string]any{}}, PolicyDecisionID: s("pol_1"),
			PrincipalChain:        []runcontext.Principal{{Kind: "user", ID: "u\u2028", TenantID: "t1", Display: "D"}, {Kind: "agent", ID: "a"}},
			ApprovalModeRequested: runcontext.ReadOnly, ApprovalModeEffective: runcontext.Delegated, ApprovalModeHighest: runcontext.Destructive,
			EvidenceRefs: []string{"x", ""}, IdempotencyKey: s("ik"), AuthRef: s(""), Metadata: map[string]any{"k": json.Number("1e2")}}, false},
		{"empty metadata map is omitted", &gateway.ToolCallEnvelope{Metadata: map[string]any{}, Args: map[string]any{}, PrincipalChain: []runcontext.Principal{}, EvidenceRefs: []string{}}, false},
		{"invalid UTF-8", &gateway.ToolCallEnvelope{RunID: "a\xffb", Args: map[string]any{"k": "\xfe"}, PrincipalChain: []runcontext.Principal{{ID: "\xc3"}}}, false},
		{"unknown approval mode", &gateway.ToolCallEnvelope{ApprovalModeRequested: "root"}, true},
		{"NaN argument", &gateway.ToolCallEnvelope{Args: map[string]any{"x": math.NaN()}}, true},
		{"full result", &gateway.ToolResultEnvelope{EnvelopeVersion: gateway.ResultEnvelopeVersion, Status: gateway.StatusPaused, Output: map[string]any{"n": 1e21, "m": math.Copysign(0, -1)},
			Error:     &gateway.ToolError{Code: "c", Reason: "r", Retryable: true, Message: "m", Details: map[string]any{"d": []any{1, "2"}}},
			Artifacts: []string{"a"}, Citations: []gateway.Citation{{EvidenceRef: "e"}}, Mutations: []string{}, RiskTags: nil, LatencyMS: -3,
			Metadata: gateway.ResultMetadata{Approver: "a", ApprovalGateID: "g", ApprovedAt: "t", ApprovalEvidenceSnapshotHash: "h", ToolTranscriptID: "x#1",
				RedactionApplied: true, Retries: 2, Attempts: 3, CostCents: 0.31, IdempotencyKey: "ik", Duplicate: true, Signals: []string{"s"},
				EvidenceHashes: []string{"sha256:x"}, ToolStatus: "paused", ToolCode: "c", ToolReason: "r", Retryable: &yes},
			Approval: &gateway.ApprovalRequest{GateID: "G", ApproverRole: "finance_lead", TTLSeconds: 3600, ActionDigest: "sha256:a", EvidenceSnapshotHash: "sha256:b",
				ToolCallID: "tool_1", IdempotencyKey: "ik", RequestedAt: time.Date(2026, 5, 4, 9, 31, 0, 5, time.FixedZone("x", 3600))}}, false},
		{"error without details", &gateway.ToolResultEnvelope{Error: &gateway.ToolError{Code: "c"}, Citations: []gateway.Citation{}}, false},
		{"infinite cost", &gateway.ToolResultEnvelope{Metadata: gateway.ResultMetadata{CostCents: math.Inf(1)}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := canon.CheckAppender(c.v); err != nil {
				t.Fatal(err)
			}
			_, err := canon.JSON(c.v)
			if (err != nil) != c.wantErr {
				t.Fatalf("canon.JSON error = %v, want error %v", err, c.wantErr)
			}
			if err != nil && !errors.Is(err, canon.ErrNotCanonicalizable) {
				t.Fatalf("error %v is not ErrNotCanonicalizable", err)
			}
		})
	}
}

// FuzzEnvelopeCanonical: for any envelope JSON can fill, the hand-written
// canonical writers agree with the general encoder.
func FuzzEnvelopeCanonical(f *testing.F) {
	f.Add([]byte(`{"envelope_version":"contextos.tool_call.v1","args":{"a":[1,2.5,"x"]},"principal_chain":[{"kind":"user","id":"u"}],"approval_mode_requested":"read_only","metadata":{"k":null}}`))
	f.Add([]byte(`{"status":"ok","output":{"b":1e300},"error":{"code":"x","details":{"y":"\u00e9"}},"citations":[{"evidence_ref":"e"}],"metadata":{"retryable":false,"cost_cents":0.1},"approval_request":{"gate_id":"g","requested_at":"2026-05-04T09:31:00Z"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var call gateway.ToolCallEnvelope
		if json.Unmarshal(data, &call) == nil {
			if err := canon.CheckAppender(&call); err != nil {
				t.Fatal(err)
			}
		}
		var res gateway.ToolResultEnvelope
		if json.Unmarshal(data, &res) == nil {
			if err := canon.CheckAppender(&res); err != nil {
				t.Fatal(err)
			}
		}
	})
}
