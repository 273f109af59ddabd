package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/runcontext"
)

// TestEnvelopeEncodings: the gateway's canonical writers give the bytes
// github.com/gowebpki/jcs gives for encoding/json's output (and the
// general encoder's), for the shapes calls never produce too (every call a
// test makes is checked by the fixture's sink).
func TestEnvelopeEncodings(t *testing.T) {
	s := func(v string) *string { return &v }
	yes := true
	cases := []struct {
		name    string
		v       any // *ToolCallEnvelope or *ToolResultEnvelope
		wantErr bool
	}{
		{"zero call", &ToolCallEnvelope{}, false},
		{"zero result", &ToolResultEnvelope{}, false},
		{"full call", &ToolCallEnvelope{EnvelopeVersion: CallEnvelopeVersion, ToolCallID: "tool_1", RunID: "run_1", TraceID: "t", SessionID: "s",
			CapabilityID: "a.b", Args: map[string]any{"z": 1.5, "a": []any{"<&>", nil, true}, "é": map[string]any{}}, PolicyDecisionID: s("pol_1"),
			PrincipalChain:        []runcontext.Principal{{Kind: "user", ID: "u\u2028", TenantID: "t1", Display: "D"}, {Kind: "agent", ID: "a"}},
			ApprovalModeRequested: runcontext.ReadOnly, ApprovalModeEffective: runcontext.Delegated, ApprovalModeHighest: runcontext.Destructive,
			EvidenceRefs: []string{"x", ""}, IdempotencyKey: s("ik"), AuthRef: s(""), Metadata: map[string]any{"k": json.Number("1e2")}}, false},
		{"empty metadata map is omitted", &ToolCallEnvelope{Metadata: map[string]any{}, Args: map[string]any{}, PrincipalChain: []runcontext.Principal{}, EvidenceRefs: []string{}}, false},
		{"invalid UTF-8", &ToolCallEnvelope{RunID: "a\xffb", Args: map[string]any{"k": "\xfe"}, PrincipalChain: []runcontext.Principal{{ID: "\xc3"}}}, false},
		{"unknown approval mode", &ToolCallEnvelope{ApprovalModeRequested: "root"}, true},
		{"NaN argument", &ToolCallEnvelope{Args: map[string]any{"x": math.NaN()}}, true},
		{"full result", &ToolResultEnvelope{EnvelopeVersion: ResultEnvelopeVersion, Status: StatusPaused, Output: map[string]any{"n": 1e21, "m": math.Copysign(0, -1)},
			Error:     &ToolError{Code: "c", Reason: "r", Retryable: true, Message: "m", Details: map[string]any{"d": []any{1, "2"}}},
			Artifacts: []string{"a"}, Citations: []Citation{{EvidenceRef: "e"}}, Mutations: []string{}, RiskTags: nil, LatencyMS: -3,
			Metadata: ResultMetadata{Approver: "a", ApprovalGateID: "g", ApprovedAt: "t", ApprovalEvidenceSnapshotHash: "h", ToolTranscriptID: "x#1",
				RedactionApplied: true, Retries: 2, Attempts: 3, CostCents: 0.31, IdempotencyKey: "ik", Duplicate: true, Signals: []string{"s"},
				EvidenceHashes: []string{"sha256:x"}, ToolStatus: "paused", ToolCode: "c", ToolReason: "r", Retryable: &yes},
			Approval: &ApprovalRequest{GateID: "G", ApproverRole: "finance_lead", TTLSeconds: 3600, ActionDigest: "sha256:a", EvidenceSnapshotHash: "sha256:b",
				ToolCallID: "tool_1", IdempotencyKey: "ik", RequestedAt: time.Date(2026, 5, 4, 9, 31, 0, 5, time.FixedZone("x", 3600)), AllowSelfApproval: true}}, false},
		{"error without details", &ToolResultEnvelope{Error: &ToolError{Code: "c"}, Citations: []Citation{}}, false},
		{"infinite cost", &ToolResultEnvelope{Metadata: ResultMetadata{CostCents: math.Inf(1)}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := encodeEnvelope(c.v)
			if (err != nil) != c.wantErr {
				t.Fatalf("encoding error = %v, want error %v", err, c.wantErr)
			}
			if err != nil {
				if !errors.Is(err, canon.ErrNotCanonicalizable) {
					t.Fatalf("error %v is not ErrNotCanonicalizable", err)
				}
				return
			}
			if diff := cmp.Diff(string(jcsOf(t, c.v)), string(got)); diff != "" {
				t.Errorf("gateway writer differs from jcs (-jcs +gateway):\n%s", diff)
			}
			general, err := canon.JSON(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(general), string(got)); diff != "" {
				t.Errorf("gateway writer differs from the general encoder (-general +gateway):\n%s", diff)
			}
		})
	}
}

// encodeEnvelope writes a call or result envelope with the gateway's
// writer, with no cached encodings.
func encodeEnvelope(v any) ([]byte, error) {
	switch e := v.(type) {
	case *ToolCallEnvelope:
		return callEncoding{e: e}.AppendCanonical(nil)
	case *ToolResultEnvelope:
		return resultEncoding{r: e}.AppendCanonical(nil)
	}
	panic(fmt.Sprintf("encodeEnvelope(%T)", v))
}

// jcsOf is v's RFC 8785 form as jcs writes it from encoding/json's
// output, or nil when either fails.
func jcsOf(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	b, err := jcs.Transform(raw)
	if err != nil {
		return nil
	}
	return b
}

// FuzzEnvelopeCanonical: for any envelope JSON can fill, the gateway's
// canonical writers write what jcs writes from encoding/json's output
// (and fail where encoding/json or jcs does).
func FuzzEnvelopeCanonical(f *testing.F) {
	f.Add([]byte(`{"envelope_version":"contextos.tool_call.v1","args":{"a":[1,2.5,"x"]},"principal_chain":[{"kind":"user","id":"u"}],"approval_mode_requested":"read_only","metadata":{"k":null}}`))
	f.Add([]byte(`{"status":"ok","output":{"b":1e300},"error":{"code":"x","details":{"y":"\u00e9"}},"citations":[{"evidence_ref":"e"}],"metadata":{"retryable":false,"cost_cents":0.1},"approval_request":{"gate_id":"g","requested_at":"2026-05-04T09:31:00Z"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []any{new(ToolCallEnvelope), new(ToolResultEnvelope)} {
			if json.Unmarshal(data, v) != nil {
				continue
			}
			got, err := encodeEnvelope(v)
			want := jcsOf(t, v)
			switch {
			case err != nil && want != nil:
				t.Fatalf("gateway writer failed (%v) where jcs wrote %s", err, want)
			case err == nil && want == nil && validModes(v):
				t.Fatalf("gateway writer wrote %s where jcs failed", got)
			case err == nil && want != nil && string(got) != string(want):
				t.Fatalf("gateway writer\n %s\njcs\n %s", got, want)
			}
		}
	})
}

// validModes reports whether a call's approval modes are known ones (the
// writer refuses others, which encoding/json writes).
func validModes(v any) bool {
	e, ok := v.(*ToolCallEnvelope)
	return !ok || (e.ApprovalModeRequested == "" || e.ApprovalModeRequested.Valid()) && (e.ApprovalModeEffective == "" || e.ApprovalModeEffective.Valid()) &&
		(e.ApprovalModeHighest == "" || e.ApprovalModeHighest.Valid())
}

// metadata.tokens encodes as RFC 8785 does, omitted when zero (so results
// recorded before it existed hash as they did), alone or among every
// other member.
func TestResultMetadataTokensCanonical(t *testing.T) {
	yes := true
	for _, n := range []int{0, 1, -1, 2484, 1<<53 - 1, -(1<<53 - 1), 1e15} {
		for _, full := range []bool{false, true} {
			e := &ToolResultEnvelope{Metadata: ResultMetadata{Tokens: n}}
			if full {
				e.Metadata = ResultMetadata{Approver: "a", ApprovalGateID: "g", ApprovedAt: "t", ApprovalEvidenceSnapshotHash: "h", ToolTranscriptID: "x#1",
					RedactionApplied: true, Retries: 2, Attempts: 3, CostCents: 0.31, IdempotencyKey: "ik", Duplicate: true, Signals: []string{"s"},
					EvidenceHashes: []string{"sha256:x"}, ToolStatus: "paused", ToolCode: "c", ToolReason: "r", Retryable: &yes, Tokens: n}
			}
			got, err := encodeEnvelope(e)
			if err != nil {
				t.Fatal(err)
			}
			if want := jcsOf(t, e); string(want) != string(got) {
				t.Errorf("tokens %d, all members %v:\n got %s\nwant %s", n, full, got, want)
			}
		}
	}
	// A count the canonical form cannot write exactly is refused, as the
	// general encoder refuses it, never rounded into the transcript.
	for _, n := range []int{1 << 53, 1<<53 + 1, -(1 << 53), math.MaxInt, math.MinInt} {
		e := &ToolResultEnvelope{Metadata: ResultMetadata{Tokens: n}}
		if got, err := encodeEnvelope(e); !errors.Is(err, canon.ErrUnsafeInteger) {
			t.Errorf("tokens %d: wrote %s, %v; want ErrUnsafeInteger", n, got, err)
		}
		if _, err := canon.JSON(e); !errors.Is(err, canon.ErrUnsafeInteger) {
			t.Errorf("tokens %d: canon.JSON = %v; want ErrUnsafeInteger", n, err)
		}
	}
}
