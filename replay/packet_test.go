package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/enums"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/schemas"
)

// chainEntries links entries into a transcript chain as the gateway does.
func chainEntries(t testing.TB, entries []gateway.TranscriptEntry) ([]gateway.TranscriptEntry, string) {
	t.Helper()
	prev := gateway.GenesisHash
	for i := range entries {
		e := &entries[i]
		var body any = e.Call
		if e.Kind == "result" {
			body = e.Result
		}
		h, err := canon.Digest(body)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq, e.EntryHash, e.PrevHash = i, h, prev
		e.ChainHash = canon.DigestBytes([]byte(prev + h))
		prev = e.ChainHash
	}
	return entries, prev
}

// fullPacket is a sealed packet with every member set.
func fullPacket(t testing.TB) *replay.Packet {
	t.Helper()
	pol := "pol_1"
	idem := "idem_1"
	entries, chain := chainEntries(t, []gateway.TranscriptEntry{
		{RunID: "run_1", Kind: "call", Call: &gateway.ToolCallEnvelope{EnvelopeVersion: gateway.CallEnvelopeVersion, ToolCallID: "tool_a", RunID: "run_1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			SessionID: "sess_1", CapabilityID: "adp_orders.lookup", Args: map[string]any{"order_id": "ord_881"},
			PrincipalChain:        []runcontext.Principal{{Kind: "user", ID: "user_1"}},
			ApprovalModeRequested: runcontext.ReadOnly, ApprovalModeEffective: runcontext.ReadOnly, ApprovalModeHighest: runcontext.ReadOnly,
			PolicyDecisionID: &pol, EvidenceRefs: []string{"kg:order:ord_881"}, IdempotencyKey: &idem, Metadata: map[string]any{"m": "v"}}},
		{RunID: "run_1", Kind: "result", Result: &gateway.ToolResultEnvelope{EnvelopeVersion: gateway.ResultEnvelopeVersion, ToolCallID: "tool_a", RunID: "run_1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			CapabilityID: "adp_orders.lookup", Status: gateway.StatusOK, Output: map[string]any{"status": "delivered", "total": 4200.0},
			Artifacts: []string{}, Citations: []gateway.Citation{{EvidenceRef: "tool:adp_orders.lookup:tool_a"}}, Mutations: []string{}, RiskTags: []string{"pii"}, PolicyDecisionID: &pol, LatencyMS: 5}},
	})
	rec := decision.Record{RecordID: "dr_1", DecisionKey: "support.refund.execute", Status: decision.Decided, Outcome: "approved",
		EvidenceRefs: []string{"kg:order:ord_881"}, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RunID: "run_1", TenantID: "tenant_1"}
	rh, err := decision.Hash(&rec)
	if err != nil {
		t.Fatal(err)
	}
	recJSON, err := json.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	invoke := json.RawMessage(`{"request_id":"req_1","input":{"intent":"refund","message":"refund please","context":{"refund_amount":4200}}}`)
	ih, err := canon.Digest(invoke)
	if err != nil {
		t.Fatal(err)
	}
	zone := time.FixedZone("IST", 5*3600+1800)
	budget := runcontext.RunBudget{TotalTokens: 1000, BucketTokens: map[runcontext.Bucket]int{runcontext.BucketEvidence: 400}, MaxToolCalls: 5, WallClockMS: 1000, MaxCostCents: 10}
	p := &replay.Packet{
		ReplayPacketID: "rp_1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SessionID: "sess_1", SourceKind: replay.SourceDecisionRecord, SourceRef: "dr_1",
		ContextPackRef: "support@1.0.0", RunContextRef: "run_1", KnowledgeSnapshotRef: "snapshot_1", CompiledContextHash: "sha256:" + strings.Repeat("ab", 32),
		ToolTranscriptChainHash: chain, SideEffectPolicy: replay.TranscriptOnly,
		Expected:     replay.Expected{Status: "DECIDED", DecisionRecordHash: rh, Scorecard: map[string]any{"utility": 1.0}, Properties: []string{"refund_issued"}},
		LatestResult: &replay.LatestResult{Status: replay.NotRun, EvalRunID: "eval_1", Score: 0.5, DiffRefs: []string{"d1"}, UpdatedAt: "2026-05-03T09:30:00Z"},
		PackRefs:     []string{"support@1.0.0", "finance@2.1.0"},
		PackHashes:   map[string]string{"support@1.0.0": "sha256:01", "finance@2.1.0": "sha256:02"},
		Invoke:       invoke, InvokeHash: ih,
		RunContext:    json.RawMessage(`{"run_id":"run_1","tenant_id":"tenant_1"}`),
		Evidence:      []compiler.EvidenceItem{{EvidenceRef: "kg:order:ord_881", Kind: "order", Content: "delivered", Trust: compiler.Trusted, Snapshot: "snapshot_1"}},
		Memory:        []compiler.MemoryItem{{MemoryRef: "mem_1", Content: "prefers email", State: compiler.MemoryPromoted, Confidence: 0.9}},
		PlannerOutput: []json.RawMessage{json.RawMessage(`{"steps":[{"capability_id":"adp_orders.lookup"}]}`), json.RawMessage(`{"decision":{"outcome":"approved"}}`)},
		PlannerErrors: []replay.PlannerError{{Call: 2, Reason: "planner_unavailable"}},
		Interrupts:    []replay.Interrupt{{Check: 3, Reason: "canceled"}},
		Outcomes: []replay.AdapterOutcome{
			{ToolCallID: "tool_a", CapabilityID: "adp_orders.lookup", Attempt: 1, Error: gateway.NewToolError(gateway.CodeTimeout, true, "slow", map[string]any{"timeout_ms": 5.0})},
			{ToolCallID: "tool_a", CapabilityID: "adp_orders.lookup", Attempt: 2, Outcome: &gateway.Outcome{Output: map[string]any{"status": "delivered", "card": gateway.Redacted}, Mutations: []string{"m1"}, CostCents: 0.5}, Redacted: true},
			{ToolCallID: "tool_b", CapabilityID: "adp_payments.issue_refund", Attempt: 1, Panic: true},
		},
		Clock: []time.Time{time.Date(2026, 5, 3, 9, 30, 0, 123456789, time.UTC), time.Date(2026, 5, 3, 15, 0, 1, 5, zone)},
		Resumes: []replay.Resume{{Approvals: []gateway.Approval{{ApprovalID: "apr_1", GateID: "GATE_FINANCE_APPROVAL", ActionDigest: "sha256:03",
			Approver: "user_finance_lead_77", ApproverRole: "finance_lead", DecidedAt: time.Date(2026, 5, 3, 9, 31, 0, 0, time.UTC)}}, Budget: &budget}},
		Transcript: entries,
		Record:     recJSON,
		Ledger: &compiler.ContextLedger{PackRef: "support@1.0.0", RequestID: "req_1", RunID: "run_1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", TenantID: "tenant_1",
			Packs: []compiler.LedgerPack{{Ref: "support@1.0.0", ContentHash: "sha256:01", Overlay: &pack.AppliedOverlay{OverlayID: "ov_prod", Environment: "prod", Hash: "sha256:04"}},
				{Ref: "finance@2.1.0", ContentHash: "sha256:02"}},
			Intent: "refund", SafetyMode: "read_only", Ontology: "ont.support@1.0.0", PolicyBundles: []string{"pb_1"}, Tools: []string{"adp_orders.lookup"},
			PolicyResults: []policy.Decision{}, ApprovalGates: []policy.Gate{}, GuardrailsRaised: policy.Raised{MustRefuse: []string{"r1"}, MustEscalate: []string{}},
			Budget:        compiler.LedgerBudget{TokensUsedAtCompile: 12, TruncatedBuckets: []string{"evidence"}},
			ToolsWithheld: []compiler.WithheldTool{{Capability: "adp_payments.issue_refund", Reason: "overlay"}}, EvidenceRefs: []string{"kg:order:ord_881"}, MemoryRefs: []string{"mem_1"},
			Environment:        &compiler.LedgerEnvironment{Locale: "en-IN", Currency: "INR", Timezone: "Asia/Kolkata", Defaulted: []string{"currency"}},
			DataClassification: pack.Confidential, CompiledContextHash: "sha256:" + strings.Repeat("ab", 32)},
	}
	lh, err := compiler.LedgerHash(p.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	p.Ledger.LedgerHash = lh
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	return p
}

// roundTrip encodes and decodes a packet, as a packet store does.
func roundTrip(t testing.TB, p *replay.Packet) *replay.Packet {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back replay.Packet
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}

func TestSealedPacketPasses(t *testing.T) {
	p := fullPacket(t)
	if !canon.IsDigest(p.PacketHash) {
		t.Fatalf("packet_hash = %q", p.PacketHash)
	}
	if err := p.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
	// Read back from a store, twice, and through an untyped document.
	back := roundTrip(t, roundTrip(t, p))
	if err := back.CheckIntegrity(); err != nil {
		t.Fatalf("after a JSON round trip: %v", err)
	}
	b, _ := json.Marshal(p)
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(doc)
	var again replay.Packet
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	if err := again.CheckIntegrity(); err != nil {
		t.Fatalf("after an untyped round trip: %v", err)
	}
	// Sealing again gives the same digest.
	h := back.PacketHash
	if err := back.Seal(); err != nil || back.PacketHash != h {
		t.Errorf("resealed: %s, %v; was %s", back.PacketHash, err, h)
	}
}

func TestSealDigestSurvivesRoundTrip(t *testing.T) {
	// What a JSON round trip changes must not change the digest: a
	// monotonic clock reading, a local time zone, nil versus empty lists,
	// integers in untyped outputs.
	p := fullPacket(t)
	p.Clock = append(p.Clock, time.Now(), time.Now().Local())
	p.Outcomes[1].Outcome.Output["big"] = int64(1<<53 + 1)
	p.Outcomes[1].Outcome.Output["n"] = 7
	p.PlannerErrors, p.Interrupts = []replay.PlannerError{}, nil
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	back := roundTrip(t, p)
	if err := back.CheckIntegrity(); err != nil {
		t.Fatalf("after a JSON round trip: %v", err)
	}
	h := back.PacketHash
	if err := back.Seal(); err != nil || back.PacketHash != h {
		t.Errorf("the round trip changed the digest: %s, was %s", back.PacketHash, h)
	}
}

func TestUnsealedPacketIsInvalid(t *testing.T) {
	p := fullPacket(t)
	p.PacketHash = ""
	if err := p.CheckIntegrity(); !errors.Is(err, replay.ErrInvalid) || !strings.Contains(err.Error(), "not sealed") {
		t.Errorf("unsealed: %v", err)
	}
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), "packet_hash") {
		t.Errorf("an unsealed packet writes packet_hash: %s", b)
	}
}

func TestSealRefusesWhatCheckIntegrityRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		change func(p *replay.Packet)
		want   error
	}{
		"no id":          {func(p *replay.Packet) { p.ReplayPacketID = "" }, replay.ErrInvalid},
		"unknown policy": {func(p *replay.Packet) { p.SideEffectPolicy = "live" }, replay.ErrInvalid},
		"invoke hash":    {func(p *replay.Packet) { p.InvokeHash = "sha256:00" }, replay.ErrTamper},
		"chain":          {func(p *replay.Packet) { p.ToolTranscriptChainHash = gateway.GenesisHash }, replay.ErrTamper},
		"status":         {func(p *replay.Packet) { p.Expected.Status = "REJECTED" }, replay.ErrTamper},
		// The kind is outside the entry's hash: a call renamed keeps
		// every chain link.
		"entry kind": {func(p *replay.Packet) { p.Transcript[0].Kind = "approval" }, replay.ErrTamper},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := fullPacket(t)
			p.PacketHash = ""
			tc.change(p)
			if err := p.Seal(); !errors.Is(err, tc.want) || p.PacketHash != "" {
				t.Errorf("Seal = %v (packet_hash %q), want %v", err, p.PacketHash, tc.want)
			}
		})
	}
}

func TestExpectedStatusMustBeTheRecordStatus(t *testing.T) {
	// Even with a packet_hash recomputed over the changed status (the
	// digest is a checksum anyone can recompute), the status is checked
	// against the record the record hash protects.
	p := fullPacket(t)
	p.Expected.Status = "REJECTED"
	h, err := replay.PacketDigest(p)
	if err != nil {
		t.Fatal(err)
	}
	p.PacketHash = h
	err = p.CheckIntegrity()
	if !errors.Is(err, replay.ErrTamper) || !strings.Contains(err.Error(), "expected.status") || strings.Contains(err.Error(), "REJECTED") {
		t.Errorf("CheckIntegrity = %v", err)
	}
}

// TestEveryMemberIsSealed changes each member of a sealed packet, and
// each value inside it, one at a time: every change but one inside
// latest_result is refused as tampering. The members are found by
// reflection, so a member added later is covered without changing the
// test.
func TestEveryMemberIsSealed(t *testing.T) {
	sealed, err := json.Marshal(fullPacket(t))
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *replay.Packet {
		var p replay.Packet
		if err := json.Unmarshal(sealed, &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	count := &mutator{target: -1}
	count.walk(reflect.ValueOf(fresh()).Elem(), "")
	if len(count.unsupported) > 0 {
		t.Fatalf("the test cannot change values of these kinds: %v", count.unsupported)
	}
	touched := map[string]bool{}
	for i := range count.n {
		p := fresh()
		m := &mutator{target: i}
		m.walk(reflect.ValueOf(p).Elem(), "")
		member, _, _ := strings.Cut(strings.TrimPrefix(m.path, "."), ".")
		member, _, _ = strings.Cut(member, "[")
		member, _, _ = strings.Cut(member, "{")
		member, _, _ = strings.Cut(member, "=")
		touched[member] = true
		err := p.CheckIntegrity()
		if member == "latest_result" {
			if err != nil {
				t.Errorf("%s: latest_result is not sealed, yet the change is refused: %v", m.path, err)
			}
			continue
		}
		if !errors.Is(err, replay.ErrTamper) {
			t.Errorf("%s: CheckIntegrity = %v, want ErrTamper", m.path, err)
		}
	}
	for _, name := range jsonNames(reflect.TypeFor[replay.Packet]()) {
		if !touched[name] {
			t.Errorf("member %s was never changed", name)
		}
	}
	t.Logf("%d changes over %d members", count.n, len(touched))
}

func jsonNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// mutator walks a value in a fixed order and applies its target-th
// change (or, with target -1, only counts them).
type mutator struct {
	target, n   int
	path        string
	unsupported []string
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// change applies the change when it is the target; it reports whether
// the walk is over.
func (m *mutator) change(path string, apply func()) bool {
	if m.n == m.target {
		apply()
		m.path = path
		return true
	}
	m.n++
	return false
}

func (m *mutator) walk(v reflect.Value, path string) bool {
	switch {
	case v.Type() == timeType:
		return m.change(path, func() { v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Second))) })
	case v.Type() == rawType:
		return m.change(path, func() {
			raw := v.Bytes()
			if len(raw) == 0 {
				raw = []byte("true")
			}
			v.SetBytes([]byte(`{"tampered":` + string(raw) + `}`))
		})
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return m.change(path+"=new", func() { v.Set(reflect.New(v.Type().Elem())) })
		}
		return m.change(path+"=nil", func() { v.SetZero() }) || m.walk(v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if m.walk(v.Field(i), path+"."+name) {
				return true
			}
		}
		return false
	case reflect.Slice:
		if m.change(path+"[len]", func() {
			if v.Len() > 0 {
				v.Set(v.Slice(0, v.Len()-1))
			} else {
				v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
			}
		}) {
			return true
		}
		for i := range v.Len() {
			if m.walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i)) {
				return true
			}
		}
		return false
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			m.unsupported = append(m.unsupported, path+" "+v.Type().String())
			return false
		}
		if m.change(path+"{+}", func() {
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			v.SetMapIndex(reflect.ValueOf("tampered").Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		}) {
			return true
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			tmp := reflect.New(v.Type().Elem()).Elem()
			tmp.Set(v.MapIndex(k))
			if m.walk(tmp, path+"{"+k.String()+"}") {
				v.SetMapIndex(k, tmp)
				return true
			}
		}
		return false
	case reflect.Interface:
		return m.change(path, func() {
			s, _ := v.Interface().(string)
			v.Set(reflect.ValueOf(s + "x"))
		})
	case reflect.String:
		return m.change(path, func() { v.SetString(otherString(v.String())) })
	case reflect.Bool:
		return m.change(path, func() { v.SetBool(!v.Bool()) })
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return m.change(path, func() { v.SetInt(v.Int() + 1) })
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return m.change(path, func() { v.SetUint(v.Uint() + 1) })
	case reflect.Float32, reflect.Float64:
		return m.change(path, func() { v.SetFloat(v.Float() + 1) })
	}
	m.unsupported = append(m.unsupported, path+" "+v.Type().String())
	return false
}

// otherString is another member of s's enum, so a change is not refused
// for being out of its vocabulary, or s with a byte added.
func otherString(s string) string {
	for _, enum := range [][]string{
		toStrings(replay.SideEffectPolicies()), toStrings(replay.SourceKinds()), toStrings(replay.Statuses()),
		enums.DecisionStatuses(), toStrings(gateway.Statuses()), enums.ApprovalModes(),
	} {
		if i := slices.Index(enum, s); i >= 0 {
			return enum[(i+1)%len(enum)]
		}
	}
	return s + "x"
}

func toStrings[T ~string](v []T) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = string(x)
	}
	return out
}

// TestListsKeepTheirMeaningThroughJSON: evidence and memory come back as
// the live sources returned them (nil or empty), because the compiler
// hashes that difference; the other lists come back empty either way and
// digest the same.
func TestListsKeepTheirMeaningThroughJSON(t *testing.T) {
	ctx := context.Background()
	for _, ev := range [][]compiler.EvidenceItem{nil, {}} {
		for _, mem := range [][]compiler.MemoryItem{nil, {}} {
			p := fullPacket(t)
			p.Evidence, p.Memory = ev, mem
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			back := roundTrip(t, p)
			if err := back.CheckIntegrity(); err != nil {
				t.Fatal(err)
			}
			if (back.Evidence == nil) != (ev == nil) || (back.Memory == nil) != (mem == nil) {
				t.Errorf("evidence %#v, memory %#v came back as %#v, %#v", ev, mem, back.Evidence, back.Memory)
			}
			// What the compiler hashes for the live run and the replay.
			live, _ := compiler.StaticEvidence(ev).Evidence(ctx, compiler.EvidenceQuery{})
			replayed, _ := compiler.StaticEvidence(back.Evidence).Evidence(ctx, compiler.EvidenceQuery{})
			lh, _ := canon.Digest(live)
			rh, _ := canon.Digest(replayed)
			if lh != rh {
				t.Errorf("evidence %#v: the replay's evidence hashes %s, the live run's %s", ev, rh, lh)
			}
			lm, _ := canon.Digest(mem)
			rm, _ := canon.Digest(back.Memory)
			if lm != rm {
				t.Errorf("memory %#v: the replay's memory hashes %s, the live run's %s", mem, rm, lm)
			}
		}
	}

	nilLists := fullPacket(t)
	nilLists.PlannerOutput, nilLists.Outcomes, nilLists.Clock, nilLists.PlannerErrors, nilLists.Interrupts, nilLists.Resumes = nil, nil, nil, nil, nil, nil
	nilLists.PackHashes = nil
	empty := fullPacket(t)
	empty.PlannerOutput, empty.Outcomes, empty.Clock, empty.PlannerErrors, empty.Interrupts, empty.Resumes = []json.RawMessage{}, []replay.AdapterOutcome{}, []time.Time{}, []replay.PlannerError{}, []replay.Interrupt{}, []replay.Resume{}
	empty.PackHashes = map[string]string{}
	for _, p := range []*replay.Packet{nilLists, empty} {
		if err := p.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	if nilLists.PacketHash != empty.PacketHash {
		t.Errorf("nil and empty lists digest differently: %s, %s", nilLists.PacketHash, empty.PacketHash)
	}
	b, _ := json.Marshal(nilLists)
	for _, member := range []string{`"planner_outputs":[]`, `"adapter_outcomes":[]`, `"clock":[]`, `"pack_content_hashes":{}`} {
		if !strings.Contains(string(b), member) {
			t.Errorf("nil is not written as empty: no %s in %s", member, b)
		}
	}
	for _, member := range []string{`"planner_errors"`, `"interrupts"`, `"resumes"`} {
		if strings.Contains(string(b), member) {
			t.Errorf("%s written for a nil list: %s", member, b)
		}
	}
	for _, p := range []*replay.Packet{nilLists, empty} {
		if err := roundTrip(t, p).CheckIntegrity(); err != nil {
			t.Error(err)
		}
	}
}

func TestSealedPacketsValidateAgainstTheSchema(t *testing.T) {
	nilLists := fullPacket(t)
	nilLists.PlannerOutput, nilLists.Outcomes, nilLists.Clock, nilLists.Evidence, nilLists.Memory, nilLists.PackHashes = nil, nil, nil, nil, nil, nil
	emptyLists := fullPacket(t)
	emptyLists.Evidence, emptyLists.Memory = []compiler.EvidenceItem{}, []compiler.MemoryItem{}
	for name, p := range map[string]*replay.Packet{"full": fullPacket(t), "nil lists": nilLists, "empty lists": emptyLists} {
		if err := p.Seal(); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		if err := schemas.Validate("replay-packet", b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		p.PacketHash = ""
		b, _ = json.Marshal(p)
		if err := schemas.Validate("replay-packet", b); err == nil || !strings.Contains(err.Error(), "packet_hash") {
			t.Errorf("%s: an unsealed packet validates: %v", name, err)
		}
	}
}

// A packet pins its record as the decision store holds it: the store's
// record_hash (which covers prev_record_hash) is the packet's
// expected.decision_record_hash, and the record's own copies of that hash
// may not disagree with it.
func TestPacketPinsTheStoredRecord(t *testing.T) {
	store := decision.NewMemoryStore()
	ctx := context.Background()
	for _, id := range []string{"dr_0", "dr_1"} {
		rec := &decision.Record{RecordID: id, DecisionKey: "support.refund.execute", Status: decision.Decided, Outcome: "approved",
			EvidenceRefs: []string{"kg:order:ord_881"}, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RunID: "run_1", TenantID: "tenant_1",
			Lineage: decision.Lineage{CompiledContextHash: "sha256:" + strings.Repeat("ab", 32)}}
		rec.SetReplayPacketID("rp_1")
		if _, err := store.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := store.Get(ctx, "dr_1")
	if err != nil {
		t.Fatal(err)
	}
	if stored.PrevRecordHash == decision.GenesisHash {
		t.Fatal("the record should chain onto another")
	}
	pin := func(edit func(r *decision.Record)) *replay.Packet {
		p := fullPacket(t)
		r := *stored
		rp := *stored.Replay
		r.Replay = &rp
		if edit != nil {
			edit(&r)
		}
		p.Record, _ = json.Marshal(&r)
		p.Expected.DecisionRecordHash = stored.RecordHash
		return p
	}
	if err := pin(nil).Seal(); err != nil {
		t.Fatalf("a packet pinning the stored record: %v", err)
	}
	other := "sha256:" + strings.Repeat("0", 64)
	for name, tc := range map[string]struct {
		edit func(r *decision.Record)
		want string
	}{
		"record_hash":        {func(r *decision.Record) { r.RecordHash = other }, "record_hash is not expected"},
		"replay.record_hash": {func(r *decision.Record) { r.Replay.RecordHash = other }, "replay.record_hash is not expected"},
		"prev_record_hash":   {func(r *decision.Record) { r.PrevRecordHash = decision.GenesisHash }, "does not match expected.decision_record_hash"},
		"replay_packet_id":   {func(r *decision.Record) { r.Replay.ReplayPacketID = "rp_2" }, "does not match expected.decision_record_hash"},
	} {
		err := pin(tc.edit).Seal()
		if !errors.Is(err, replay.ErrTamper) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s edited: Seal = %v, want ErrTamper (%s)", name, err, tc.want)
		}
	}
}
