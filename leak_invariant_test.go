package contextos_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// The "nothing sensitive leaks" promise (docs/guarantees.md, "Hostile
// input fails closed, and nothing sensitive leaks") over generated runs,
// as TestBudgetsExactGeneratedRuns holds the budget promise. Each run is
// generated from a seed and plants secrets, distinct per run and per
// place, of several kinds — vendor API keys (sk-, sk_live_, ghp_; and
// sk-proj-, sk-ant-, ghp_, xoxb- glued after '_' to a name), bearer
// tokens, JSON Web Tokens, a key base64-wrapped; and the personal data the
// catalogue knows: Luhn-valid card numbers (as written, grouped, dashed,
// percent-encoded, base64-wrapped), IBANs (compact and grouped) and email
// addresses — into every input a caller, a model, a tool or the host
// controls:
//
//   - the request's message, channel and context (flat and nested), the
//     user's additional claims, the run context's metadata, the
//     extension members of both, the trace baggage, and (rarely: it is
//     refused at validation) an attachment's uri;
//   - the plans: step arguments, evidence refs, idempotency keys and
//     attachments, the decision's key, outcome, outputs, rationale,
//     subject ids and evidence refs, memory proposals' content, and a
//     replan reason; a planner's error and a PlanUsageError's;
//   - the tools: output values, map keys, mutations, citations, risk tags,
//     signals, artifacts, progress messages, and a ToolError's message,
//     reason and details (retryable and not);
//   - the host: a critic's replan or reject reason, an evidence item's
//     content, a recalled memory item's content, an approver's reason
//     (approval or denial), an evidence item's source id and a memory
//     item's tier, and (rarely: the run is refused at its compile) the
//     evidence source's or the memory store's error.
//
// The runs go through Invoke (streamed), pauses at the finance gate and
// their approval or denial, Resume (streamed), retries, failures, resumes
// of stopped runs, and takeovers of a runtime frozen in a planner turn.
// Every surface is scanned: each result and error returned, every stream
// event, every planner request (what the model is sent), every decision
// record stored, the transcript, every replay packet saved (its JSON) and
// as the store returns it, the report of each packet's replay (a diff
// quotes what differs), every checkpoint saved, the memory proposals
// stored, the log lines (debug), the spans (names, attributes, events,
// status, links), the metrics (names and attribute sets), the pause
// hook's payloads and the pending-approvals listing of each pause.
//
// What must hold (leakPromised): no surface holds a planted credential,
// as planted, base64-encoded, or (the base64-wrapped one) decoded; no
// surface holds a card number, IBAN or email address as digits with every
// space, dash or percent-encoded separator taken out, as the compact
// IBAN, or base64-encoded — except where the docs say it is kept as given
// (leakAsGivenExempt, leakKnowledgeExempt) or the pack names no rule for
// a tool's. Each exemption cites its doc line.
//
// Each case is generated from a PCG source seeded with (leakInvSeed, case
// index), so a failing case reruns by its name:
//
//	go test -run 'TestNothingLeaksGeneratedRuns/cases/case_0042' .
//
// and its failure prints the scenario and where each leak was planted.
// The default is leakInvRuns cases (-short: fewer); CONTEXTOS_LEAK_RUNS=n
// runs n; CONTEXTOS_LEAK_DEBUG=1 logs each run's verdicts, steps and end.
// FuzzNothingLeaks explores other seeds.
const (
	leakInvSeed = 0x1ea4_5ec2_2026
	leakInvRuns = 40
)

func TestNothingLeaksGeneratedRuns(t *testing.T) {
	n := leakInvRuns
	if testing.Short() {
		n = 12
	}
	if s := os.Getenv("CONTEXTOS_LEAK_RUNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("CONTEXTOS_LEAK_RUNS=%q: want a count ≥ 1", s)
		}
		n = v
	}
	var mu sync.Mutex
	stats := map[string]int{}
	t.Run("cases", func(t *testing.T) {
		for i := range n {
			sc := genLeakScenario(leakInvSeed, uint64(i))
			t.Run(fmt.Sprintf("case_%04d", i), func(t *testing.T) {
				t.Parallel()
				st := runLeakScenario(t, sc)
				mu.Lock()
				defer mu.Unlock()
				for k, v := range st {
					stats[k] += v
				}
			})
		}
	})
	t.Logf("%d generated runs: %v", n, stats)
}

func FuzzNothingLeaks(f *testing.F) {
	for i := range 4 {
		f.Add(uint64(leakInvSeed), uint64(i))
	}
	f.Fuzz(func(t *testing.T, seed, idx uint64) {
		runLeakScenario(t, genLeakScenario(seed, idx))
	})
}

// Secrets.

// leakPlant is one secret planted at one place.
type leakPlant struct {
	Where string `json:"where"`
	Kind  string `json:"kind"`
	// Text is what is planted (the secret in its context).
	Text string `json:"text"`
	// Needles are what no surface may hold: the secret's forms a reader
	// could take it back from. Squeezed needles are sought in the
	// surface with separators taken out.
	Needles  []string `json:"needles"`
	Squeezed []string `json:"squeezed,omitempty"`
}

// leakKinds are the kinds planted; the first ten are credentials (never
// stored anywhere), the others personal data. The glued ones are vendor
// keys glued after '_' to a name ("e_sk-proj-…").
var leakKinds = []string{"sk", "stripe", "ghp", "bearer", "jwt", "b64key", "sk_glued", "ghp_glued", "xoxb_glued", "ant_glued", "card", "card_grouped", "card_dashed", "card_pct", "card_b64", "iban", "iban_grouped", "email"}

func leakIsCredential(kind string) bool { return slices.Index(leakKinds, kind) < 10 }

const leakAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func leakRand(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// leakCardNumber is a Luhn-valid 16-digit Visa number.
func leakCardNumber(r *rand.Rand) string {
	d := make([]int, 16)
	d[0] = 4
	for i := 1; i < 15; i++ {
		d[i] = r.IntN(10)
	}
	sum := 0
	for i := 0; i < 15; i++ {
		v := d[i]
		if i%2 == 0 { // doubled: every second digit from the check digit's left
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	d[15] = (10 - sum%10) % 10
	var b strings.Builder
	for _, x := range d {
		b.WriteByte(byte('0' + x))
	}
	return b.String()
}

// leakIBAN is a German IBAN whose mod-97 check holds.
func leakIBAN(r *rand.Rand) string {
	bban := leakRand(r, "0123456789", 18)
	// Check digits: 98 - (BBAN + "DE00" as digits) mod 97; D=13, E=14.
	num := bban + "131400"
	rem := 0
	for _, c := range num {
		rem = (rem*10 + int(c-'0')) % 97
	}
	return fmt.Sprintf("DE%02d%s", 98-rem, bban)
}

func leakGroup(s string, n int, sep string) string {
	var parts []string
	for len(s) > n {
		parts = append(parts, s[:n])
		s = s[n:]
	}
	return strings.Join(append(parts, s), sep)
}

func newLeakPlant(r *rand.Rand, where, kind string) leakPlant {
	p := leakPlant{Where: where, Kind: kind}
	switch kind {
	case "sk":
		k := "sk-proj-" + leakRand(r, leakAlnum, 28)
		p.Text, p.Needles = "use api key "+k, []string{k}
	case "stripe":
		k := "sk_live_" + leakRand(r, leakAlnum, 24)
		p.Text, p.Needles = "stripe "+k+" ok", []string{k}
	case "ghp":
		k := "ghp_" + leakRand(r, leakAlnum, 36)
		p.Text, p.Needles = "token "+k, []string{k}
	case "bearer":
		k := leakRand(r, leakAlnum, 32)
		p.Text, p.Needles = "Authorization: Bearer "+k, []string{k}
	case "jwt":
		seg := func(n int) string { return leakRand(r, leakAlnum+"_-", n) }
		body := "eyJ" + seg(14)
		k := "eyJhbGciOiJIUzI1NiJ9." + body + "." + seg(22)
		p.Text, p.Needles = "session "+k, []string{k, body}
	case "sk_glued":
		k := "sk-proj-" + leakRand(r, leakAlnum+"_-", 48)
		p.Text, p.Needles = "use e_"+k, []string{k}
	case "ghp_glued":
		k := "ghp_" + leakRand(r, leakAlnum, 36)
		p.Text, p.Needles = "x_"+k+" ok", []string{k}
	case "xoxb_glued":
		k := "xoxb-" + leakRand(r, "0123456789", 10) + "-" + leakRand(r, "0123456789", 13) + "-" + leakRand(r, leakAlnum, 24)
		p.Text, p.Needles = "token_"+k, []string{k}
	case "ant_glued":
		k := "sk-ant-api03-" + leakRand(r, leakAlnum+"_-", 93) + "AA"
		p.Text, p.Needles = "key=abc_"+k, []string{k}
	case "b64key":
		k := "sk-proj-" + leakRand(r, leakAlnum, 28)
		enc := base64.StdEncoding.EncodeToString([]byte("api_key=" + k))
		p.Text, p.Needles = "blob "+enc, []string{k, enc}
	case "card", "card_grouped", "card_dashed", "card_pct", "card_b64":
		c := leakCardNumber(r)
		p.Squeezed = []string{c}
		p.Needles = []string{c}
		switch kind {
		case "card":
			p.Text = "card " + c
		case "card_grouped":
			p.Text = "card " + leakGroup(c, 4, " ")
		case "card_dashed":
			p.Text = "card " + leakGroup(c, 4, "-")
		case "card_pct":
			p.Text = "card=" + leakGroup(c, 4, "%20")
		case "card_b64":
			enc := base64.StdEncoding.EncodeToString([]byte("card " + c))
			p.Text, p.Needles = "blob "+enc, []string{c, enc}
		}
	case "iban", "iban_grouped":
		i := leakIBAN(r)
		p.Squeezed = []string{i}
		p.Needles = []string{i}
		p.Text = "pay to " + i
		if kind == "iban_grouped" {
			p.Text = "pay to " + leakGroup(i, 4, " ")
		}
	case "email":
		e := strings.ToLower(leakRand(r, leakAlnum, 10)) + ".leak@example.org"
		p.Text, p.Needles = "mail "+e, []string{e}
	default:
		panic("unknown kind " + kind)
	}
	// A surface that holds a needle's base64 (a []byte member as
	// encoding/json writes it) holds the needle.
	for _, n := range slices.Clone(p.Needles) {
		if len(n) >= 12 {
			p.Needles = append(p.Needles, base64.StdEncoding.EncodeToString([]byte(n)), base64.RawURLEncoding.EncodeToString([]byte(n)))
		}
	}
	return p
}

// leakPlaces are where a run may plant, by who writes them: the caller,
// the planner, a tool, the host.
var leakPlaces = []string{
	"caller.message", "caller.channel", "caller.context", "caller.context_nested", "caller.claim", "caller.metadata",
	"caller.extension", "caller.baggage", "caller.attachment_uri",
	"planner.args", "planner.step_evidence_ref", "planner.idempotency_key", "planner.attachment",
	"planner.decision_key", "planner.outcome", "planner.outputs", "planner.rationale", "planner.subject_id", "planner.evidence_ref",
	"planner.memory", "planner.replan", "planner.error", "planner.usage_error",
	"tool.output", "tool.output_key", "tool.mutation", "tool.citation", "tool.risk_tag", "tool.signal", "tool.artifact", "tool.progress",
	"tool.error_message", "tool.error_reason", "tool.error_details",
	"host.critic_reason", "host.evidence", "host.memory", "host.approval_reason",
	"host.evidence_error", "host.memory_error", "host.evidence_source_id", "host.memory_tier",
}

// leakAsGiven reports whether personal data at where is documented as
// stored as given: text the caller or the planner writes.
func leakAsGiven(where string) bool {
	return strings.HasPrefix(where, "caller.") || strings.HasPrefix(where, "planner.")
}

// leakAsGivenExempt are the surfaces that are the run's own account of
// what it was given, and so hold caller and planner text as given
// (docs/guarantees.md, "Known limits": "text the caller
// (`input.message`, `input.context`) or the planner (arguments,
// rationale) supplies is stored as given, because a replay must
// reproduce the run from it"), and the planner's requests, which carry
// the request and the earlier plans. Credentials are redacted on them
// all the same.
var leakAsGivenExempt = []string{"result", "event", "record", "transcript", "packet", "checkpoint", "memory", "planner request"}

// leakKnowledgeExempt are the surfaces that hold an evidence source's
// content and a memory store's recalled items as the source gave them,
// personal data included (docs/guarantees.md, "Known limits": "personal
// data in an evidence source's content or a memory store's recalled
// items reaches the planner and the replay packet as the source gave
// it"): only credentials are redacted where they enter.
var leakKnowledgeExempt = []string{"packet", "planner request"}

// leakPromised reports whether surface (a surface kind) must not hold
// the plant p. Credentials: never, anywhere. Personal data: the gateway
// redacts it from a tool's results and errors by the rules the pack names
// (docs/guarantees.md, "sensitive data": the gateway's built-in rules),
// so with no rule named only a progress message, which every built-in
// rule applies to, is promised; a host critic's and an approver's reason
// get every built-in rule; caller, planner and knowledge text are exempt
// where the docs say they are kept as given.
func leakPromised(sc *leakScenario, p leakPlant, surface string) bool {
	switch {
	case leakIsCredential(p.Kind):
		return true
	case leakAsGiven(p.Where):
		return !slices.Contains(leakAsGivenExempt, surface)
	case p.Where == "host.evidence" || p.Where == "host.memory" || p.Where == "host.evidence_source_id" || p.Where == "host.memory_tier":
		return !slices.Contains(leakKnowledgeExempt, surface)
	case p.Where == "tool.progress" || p.Where == "host.critic_reason" || p.Where == "host.approval_reason",
		p.Where == "host.evidence_error" || p.Where == "host.memory_error":
		return true
	}
	return sc.Rules == "full" // the other tool members
}

// Scenario.

type leakTurn struct {
	// Kind: lookup, refund, lookup_refund, deny, replan, error,
	// usage_error, memory.
	Kind   string `json:"kind"`
	Amount int    `json:"amount,omitempty"`
}

type leakScenario struct {
	Seed   uint64 `json:"seed"`
	Case   uint64 `json:"case"`
	Rules  string `json:"rules"` // "full" (pan, credit_card, iban, email) or "none"
	Amount int    `json:"amount"`
	Turns  []leakTurn
	// Attempts are each capability's successive attempts: "", "retryable"
	// or "fatal"; past the list, "".
	Attempts map[string][]string `json:"attempts"`
	// Approvals answer successive pauses: "approve" or "deny".
	Approvals []string `json:"approvals"`
	// Critic: "" (none), "replan" or "reject" at its CriticAt-th Verify.
	Critic   string `json:"critic,omitempty"`
	CriticAt int    `json:"critic_at,omitempty"`
	// FreezeAt is the planner call (from 1) in which the first runtime
	// freezes, to be taken over; 0: none.
	FreezeAt    int         `json:"freeze_at,omitempty"`
	ResumeStops int         `json:"resume_stops"`
	Plants      []leakPlant `json:"plants"`
}

func (sc *leakScenario) String() string {
	b, _ := json.MarshalIndent(sc, "", "  ")
	return string(b)
}

// plant returns what is planted at where ("" when nothing is).
func (sc *leakScenario) plant(where string) string {
	for _, p := range sc.Plants {
		if p.Where == where {
			return p.Text
		}
	}
	return ""
}

// with returns s followed by what is planted at where.
func (sc *leakScenario) with(s, where string) string {
	if p := sc.plant(where); p != "" {
		return s + " " + p
	}
	return s
}

var leakCaps = []string{"adp_orders.lookup", "adp_policy.eval", "adp_payments.issue_refund"}

// leakDisruptive are places whose secret changes what the run does (a
// plan refused, a decision the critic sends back): planted less often, so
// most runs go the whole way.
var leakDisruptive = []string{"planner.decision_key", "planner.outcome", "planner.subject_id", "planner.evidence_ref", "planner.step_evidence_ref", "planner.attachment", "planner.idempotency_key", "planner.replan", "caller.claim", "caller.attachment_uri"}

func genLeakScenario(seed, idx uint64) *leakScenario {
	r := rand.New(rand.NewPCG(seed, idx))
	sc := &leakScenario{Seed: seed, Case: idx, Attempts: map[string][]string{}}
	sc.Rules = weighted(r, map[string]int{"full": 3, "none": 1})
	sc.Amount = pick(r, 1200, 4200, 4200)
	for i := range 1 + r.IntN(5) {
		k := weighted(r, map[string]int{"lookup": 5, "refund": 5, "lookup_refund": 3, "deny": 2, "replan": 1, "error": 1, "usage_error": 1, "memory": 2})
		if i == 0 && r.IntN(4) > 0 {
			k = "lookup" // most runs look the order up, then refund
		}
		if i == 1 && r.IntN(3) > 0 {
			k = pick(r, "refund", "memory", "lookup_refund")
		}
		sc.Turns = append(sc.Turns, leakTurn{Kind: k, Amount: sc.Amount})
	}
	for _, c := range leakCaps {
		for range 1 + r.IntN(4) {
			sc.Attempts[c] = append(sc.Attempts[c], weighted(r, map[string]int{"": 8, "retryable": 3, "fatal": 1}))
		}
	}
	for range 3 {
		sc.Approvals = append(sc.Approvals, weighted(r, map[string]int{"approve": 3, "deny": 1}))
	}
	if r.IntN(3) == 0 {
		sc.Critic, sc.CriticAt = pick(r, "replan", "reject"), 1+r.IntN(3)
	}
	if r.IntN(4) == 0 {
		sc.FreezeAt = 1 + r.IntN(3)
	}
	sc.ResumeStops = r.IntN(2)
	for _, where := range leakPlaces {
		chance := 85
		if slices.Contains(leakDisruptive, where) {
			chance = 30
		}
		if where == "caller.attachment_uri" || where == "host.evidence_error" || where == "host.memory_error" {
			chance = 8 // refused at validation or at the compile: the run ends there
		}
		if r.IntN(100) >= chance {
			continue
		}
		sc.Plants = append(sc.Plants, newLeakPlant(r, where, pick(r, leakKinds...)))
	}
	return sc
}

// The run's world.

// leakPlanner plans by call (over the whole run, all runtimes), planting
// in what it writes; past the scenario's turns it denies the refund.
type leakPlanner struct {
	sc               *leakScenario
	surf             *leakSurfaces
	calls            atomic.Int32
	entered, release chan struct{}
	// first is set while the run's first runtime works: only it freezes.
	first atomic.Bool
	mu    sync.Mutex
	used  map[string]bool
}

// plant is what is planted at where. A disruptive place is planted
// only past the scenario's turns (disrupt), so the run goes its way
// first, and in one plan only.
func (p *leakPlanner) plant(where string, disrupt bool) string {
	if !slices.Contains(leakDisruptive, where) {
		return p.sc.plant(where)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !disrupt || p.used[where] {
		return ""
	}
	v := p.sc.plant(where)
	if v != "" {
		if p.used == nil {
			p.used = map[string]bool{}
		}
		p.used[where] = true
	}
	return v
}

func (p *leakPlanner) with(s, where string, disrupt bool) string {
	if v := p.plant(where, disrupt); v != "" {
		return s + " " + v
	}
	return s
}

func (p *leakPlanner) Plan(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	// What the model is sent is a surface too.
	p.surf.add("planner request", req)
	n := int(p.calls.Add(1))
	if n == p.sc.FreezeAt && p.first.Load() {
		close(p.entered)
		<-p.release
	}
	sc := p.sc
	// Past the scenario's turns: the lookup and the refund, then the
	// denial, carrying the disruptive plants.
	turn := leakTurn{Kind: "deny"}
	disrupt := n > len(sc.Turns)
	switch {
	case !disrupt:
		turn = sc.Turns[n-1]
	case n == len(sc.Turns)+1:
		turn = leakTurn{Kind: "lookup_refund", Amount: sc.Amount}
	}
	if n > 12 {
		turn = leakTurn{Kind: "deny"}
	}
	var pl *contextos.Plan
	switch turn.Kind {
	case "error":
		return nil, errors.New(p.with("provider: Incorrect API key provided.", "planner.error", disrupt))
	case "usage_error":
		return nil, &contextos.PlanUsageError{Usage: contextos.PlanUsage{Tokens: 200, CostCents: 0.1}, Err: errors.New(p.with("the reply was cut off", "planner.usage_error", disrupt))}
	case "replan":
		return &contextos.Plan{Replan: p.with("no_tool_call: the model answered in text", "planner.replan", disrupt)}, nil
	case "lookup":
		pl = lookupPlan()
	case "refund":
		pl = refundPlan(turn.Amount)
	case "lookup_refund":
		pl = refundPlan(turn.Amount)
		pl.Steps = append(lookupPlan().Steps, pl.Steps...)
	case "memory":
		pl = refundPlan(turn.Amount)
		pl.Memory = []contextos.MemoryProposal{{WriteClass: "case_note", Content: p.with("customer prefers the app", "planner.memory", disrupt), Confidence: 0.9}}
	default:
		pl = deniedPlan()
	}
	for i := range pl.Steps {
		s := &pl.Steps[i]
		if v := p.plant("planner.args", disrupt); v != "" {
			s.Args["note"] = v
		}
		if v := p.plant("planner.step_evidence_ref", disrupt); v != "" {
			s.EvidenceRefs = []string{"kg:" + v}
		}
		if v := p.plant("planner.attachment", disrupt); v != "" {
			s.Attachments = []string{"att:" + v}
		}
		if v := p.plant("planner.idempotency_key", disrupt); v != "" && s.CapabilityID == "adp_payments.issue_refund" {
			s.IdempotencyKey = "idem " + v
		}
	}
	if d := pl.Decision; d != nil {
		d.DecisionKey = p.with(d.DecisionKey, "planner.decision_key", disrupt)
		d.Outcome = p.with(d.Outcome, "planner.outcome", disrupt)
		d.Rationale = p.with(d.Rationale, "planner.rationale", disrupt)
		if v := p.plant("planner.outputs", disrupt); v != "" {
			if d.Outputs == nil {
				d.Outputs = map[string]any{}
			}
			d.Outputs["note"] = v
		}
		if v := p.plant("planner.subject_id", disrupt); v != "" {
			d.SubjectIDs = append(d.SubjectIDs, "customer:"+v)
		}
		if v := p.plant("planner.evidence_ref", disrupt); v != "" {
			d.EvidenceRefs = append(d.EvidenceRefs, "kg:"+v)
		}
	}
	return pl, nil
}

// PlannerModel names the planner's model, so each turn has its chat span
// (its error type and status too).
func (p *leakPlanner) PlannerModel() (provider, model string) { return "leakco", "leak-1" }

// leakAdapter answers a capability's attempts as the scenario says,
// planting in every member an outcome and an error can carry.
type leakAdapter struct {
	sc    *leakScenario
	cap   string
	mu    *sync.Mutex
	tries map[string]int
}

func (a leakAdapter) Call(ctx context.Context, call *gateway.Call) (*gateway.Outcome, error) {
	sc := a.sc
	a.mu.Lock()
	n := a.tries[a.cap]
	a.tries[a.cap]++
	a.mu.Unlock()
	if v := sc.plant("tool.progress"); v != "" {
		gateway.ReportProgress(ctx, call, gateway.Progress{Progress: 1, Total: 2, Message: "working: " + v})
	}
	st := ""
	if s := sc.Attempts[a.cap]; n < len(s) {
		st = s[n]
	}
	if st != "" {
		te := &gateway.ToolError{Code: gateway.CodeExecutionFailed, Retryable: st == "retryable",
			Message: sc.with("upstream refused", "tool.error_message"), Reason: sc.with("upstream", "tool.error_reason")}
		if v := sc.plant("tool.error_details"); v != "" {
			te.Details = map[string]any{"body": map[string]any{"echo": v, "list": []any{v}}}
		}
		return nil, te
	}
	out := &gateway.Outcome{}
	switch a.cap {
	case "adp_orders.lookup":
		out.Output = map[string]any{"order_id": "ord_881", "status": "delivered", "total_inr": 4200}
	case "adp_policy.eval":
		out.Output = map[string]any{"eligible": true}
	default:
		out.Output, out.Mutations = map[string]any{"transaction_id": "txn_q9"}, []string{"refund:txn_q9"}
		if v := sc.plant("tool.mutation"); v != "" {
			out.Mutations = append(out.Mutations, "charged:"+v)
		}
	}
	if v := sc.plant("tool.output"); v != "" {
		out.Output["payment"] = map[string]any{"note": v, "history": []any{"seen " + v}}
	}
	if v := sc.plant("tool.output_key"); v != "" {
		out.Output[v] = "key"
	}
	if v := sc.plant("tool.citation"); v != "" {
		out.Citations = []gateway.Citation{{EvidenceRef: "kg:" + v}}
	}
	if v := sc.plant("tool.risk_tag"); v != "" {
		out.RiskTags = []string{"owner " + v}
	}
	if v := sc.plant("tool.signal"); v != "" {
		out.Signals = []string{"seen " + v}
	}
	if v := sc.plant("tool.artifact"); v != "" {
		out.Artifacts = []string{"note:" + v}
	}
	return out, nil
}

// leakCritic sends back the plan it verifies at the scenario's point,
// with a reason that plants; it passes everything else.
type leakCritic struct {
	sc *leakScenario
	n  atomic.Int32
}

func (c *leakCritic) Verify(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	if int(c.n.Add(1)) == c.sc.CriticAt {
		return contextos.Judgement{Verdict: contextos.CriticVerdict(c.sc.Critic), Reason: c.sc.with("the plan is wrong", "host.critic_reason")}, nil
	}
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}

func (c *leakCritic) Score(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	return contextos.Judgement{Verdict: contextos.VerdictAccept}, nil
}

// leakSurfaces collects every surface of a run, by name ("kind name").
type leakSurfaces struct {
	mu sync.Mutex
	m  map[string][]byte
	n  map[string]int
}

func (s *leakSurfaces) add(kind string, v any) {
	var b []byte
	switch x := v.(type) {
	case []byte:
		b = bytes.Clone(x)
	case string:
		b = []byte(x)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			b = fmt.Appendf(nil, "%+v", v)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m, s.n = map[string][]byte{}, map[string]int{}
	}
	s.n[kind]++
	s.m[fmt.Sprintf("%s #%d", kind, s.n[kind])] = b
}

type leakCheckpoints struct {
	*contextos.InMemoryCheckpoints
	s *leakSurfaces
}

func (c leakCheckpoints) Save(ctx context.Context, cp *contextos.Checkpoint) error {
	c.s.add("checkpoint", cp.Data)
	return c.InMemoryCheckpoints.Save(ctx, cp)
}

type leakPackets struct {
	*contextos.InMemoryPackets
	s *leakSurfaces
}

func (p leakPackets) Save(ctx context.Context, pk *replay.Packet) error {
	p.s.add("packet", pk)
	return p.InMemoryPackets.Save(ctx, pk)
}

// leakSpans renders the spans: names, attributes, events, status, links.
func leakSpans(spans tracetest.SpanStubs) string {
	var b strings.Builder
	attrs := func(kvs []attribute.KeyValue) {
		for _, a := range kvs {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
		}
	}
	for _, sp := range spans {
		fmt.Fprintf(&b, "span %s", sp.Name)
		attrs(sp.Attributes)
		for _, e := range sp.Events {
			fmt.Fprintf(&b, " event %s", e.Name)
			attrs(e.Attributes)
		}
		for _, l := range sp.Links {
			b.WriteString(" link")
			attrs(l.Attributes)
		}
		fmt.Fprintf(&b, " status %s %s\n", sp.Status.Code, sp.Status.Description)
	}
	return b.String()
}

// leakMetrics renders the metrics collected: names and attribute sets.
func leakMetrics(t *testing.T, r *sdkmetric.ManualReader) string {
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("metrics: %v", err)
	}
	var b strings.Builder
	set := func(s attribute.Set) {
		for _, a := range s.ToSlice() {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			fmt.Fprintf(&b, "metric %s %s", m.Name, m.Description)
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					set(p.Attributes)
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					set(p.Attributes)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					set(p.Attributes)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					set(p.Attributes)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					set(p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					set(p.Attributes)
				}
			default:
				fmt.Fprintf(&b, " %T %+v", d, d)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// leakSqueeze takes the separators a reader would take out of a card
// number or an IBAN: spaces, dashes, dots and their percent-encodings.
var leakSqueeze = strings.NewReplacer(" ", "", "-", "", ".", "", "%20", "", "%2D", "", "%2d", "", "+", "", "\t", "", "\u00a0", "")

// runLeakScenario runs one generated run to its end and scans every
// surface; it returns counts of what the run did.
func runLeakScenario(t *testing.T, sc *leakScenario) map[string]int {
	stats := map[string]int{}
	surf := &leakSurfaces{}
	clock := newFakeClock()
	ck := leakCheckpoints{contextos.NewInMemoryCheckpoints(), surf}
	ck.Now = clock.Now
	pks := leakPackets{contextos.NewInMemoryPackets(), surf}
	var logs lockedBuffer
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	memItems := propertyMemory(t)
	if v := sc.plant("host.memory"); v != "" {
		memItems = append(memItems, compiler.MemoryItem{MemoryRef: "mem:cus_77:note", Content: "Customer noted: " + v, Tier: "semantic", State: compiler.MemoryPromoted, Confidence: 0.9})
	}
	if v := sc.plant("host.memory_tier"); v != "" {
		memItems = append(memItems, compiler.MemoryItem{MemoryRef: "mem:cus_77:tier", Content: "Customer noted a tier", Tier: "semantic " + v, State: compiler.MemoryPromoted, Confidence: 0.9})
	}
	mem := newRawMemory(memItems...)

	doc := readTestdata(t, "ctxpack.support-1.0.0.json")
	rules := `"redaction_rules": []`
	if sc.Rules == "full" {
		rules = `"redaction_rules": ["pan", "credit_card", "iban", "email"]`
	}
	edited := bytes.Replace(doc, []byte(`"redaction_rules": ["pan", "credit_card"]`), []byte(rules), 1)
	if bytes.Equal(doc, edited) {
		t.Fatal("the support pack's redaction rules moved: edit runLeakScenario")
	}

	var mu sync.Mutex
	tries := map[string]int{}
	regs := invariantRegistrations(leakCaps, func(c string) gateway.Adapter { return leakAdapter{sc, c, &mu, tries} })
	ev := evidence(t)
	if v := sc.plant("host.evidence"); v != "" {
		ev = append(ev, compiler.EvidenceItem{EvidenceRef: "kg:note:n1", Kind: "note", Content: "ops note: " + v, Trust: compiler.Trusted})
	}
	if v := sc.plant("host.evidence_source_id"); v != "" {
		ev = append(ev, compiler.EvidenceItem{EvidenceRef: "kg:note:n2", Kind: "note", SourceID: "kb/n2 " + v, Content: "ops note", Trust: compiler.Trusted})
	}
	var evSource compiler.EvidenceSource = ev
	if v := sc.plant("host.evidence_error"); v != "" {
		evSource = failingEvidence{"knowledge graph: " + v}
	}
	var memSource contextos.MemoryStore = mem
	if v := sc.plant("host.memory_error"); v != "" {
		memSource = failingRecall{mem, "memory store: " + v}
	}
	planner := &leakPlanner{sc: sc, surf: surf, entered: make(chan struct{}), release: make(chan struct{})}
	var o contextostest.Options
	o.Now = clock.Now
	o.Runtime = contextos.Options{Adapters: regs, Evidence: evSource, ReplaySampleRate: 1, Checkpoints: ck, Replays: pks, Memory: memSource,
		Transcripts:    &gatewaytest.Recorder{},
		Logger:         slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		OnPause:        func(_ context.Context, p contextos.PendingApproval) { surf.add("pause hook", p) },
	}
	o.Runtime.Gateway.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	if sc.Critic != "" {
		o.Runtime.Critic = &leakCritic{sc: sc}
	}
	transcript := o.Runtime.Transcripts.(*gatewaytest.Recorder)
	h := contextostest.New(t, planner, [][]byte{edited}, &o)

	req, rc := refundRequest(t, sc.Amount, true)
	req.Input.Message = sc.with(req.Input.Message, "caller.message")
	req.Input.Channel = sc.with(req.Input.Channel, "caller.channel")
	if v := sc.plant("caller.context"); v != "" {
		req.Input.Context["note"] = v
	}
	if v := sc.plant("caller.context_nested"); v != "" {
		req.Input.Context["history"] = map[string]any{"notes": []any{"earlier: " + v}}
	}
	if v := sc.plant("caller.claim"); v != "" {
		b, _ := json.Marshal(v)
		req.User.Claims = map[string]json.RawMessage{"note": b}
		rc.User.Claims = req.User.Claims
	}
	if v := sc.plant("caller.extension"); v != "" {
		b, _ := json.Marshal(map[string]any{"note": v})
		req.Extensions = map[string]json.RawMessage{"x_host_note": b}
		rc.Extensions = map[string]json.RawMessage{"x_host_note": b}
	}
	if v := sc.plant("caller.baggage"); v != "" {
		req.Trace.Baggage = "userId=alice,note=" + url.PathEscape(v)
		hdr := req.Trace.Headers()
		rc.TraceContext = &hdr
	}
	if v := sc.plant("caller.attachment_uri"); v != "" {
		req.Attachments = []runcontext.Attachment{{ArtifactID: "att_1", MediaType: "text/plain",
			SHA256: strings.Repeat("ab", 32), URI: "https://files.example.com/a.txt?note=" + url.QueryEscape(v)}}
	}
	if v := sc.plant("caller.metadata"); v != "" {
		rc.Metadata = map[string]any{"deploy": map[string]any{"note": v}}
	}
	runID := rc.RunID
	ctx := context.Background()

	// stream runs one Invoke or Resume as a stream, keeping its events,
	// its result and its error.
	stream := func(seq func(yield func(contextos.Event, error) bool)) (*contextos.Result, error) {
		var res *contextos.Result
		for e, err := range seq {
			if err != nil {
				surf.add("error", err.Error())
				return nil, err
			}
			surf.add("event", e)
			if e.Verdict != nil && os.Getenv("CONTEXTOS_LEAK_DEBUG") != "" {
				t.Logf("turn %d verdict %s: %s", e.Turn, e.Verdict.Verdict, e.Verdict.Reason)
			}
			if e.Final != nil {
				res = e.Final
			}
		}
		if res != nil {
			surf.add("result", res)
		}
		return res, nil
	}
	pending := func() {
		list, err := h.Runtime.PendingApprovals(ctx, contextos.RunList{runID})
		if err != nil {
			surf.add("error", err.Error())
			return
		}
		surf.add("pending", list)
	}
	approvals := 0
	answer := func(p *gateway.ApprovalRequest) []gateway.Approval {
		if p == nil {
			return nil
		}
		kind := "approve"
		if approvals < len(sc.Approvals) {
			kind = sc.Approvals[approvals]
		}
		approvals++
		stats["approval_"+kind]++
		a := contextostest.Approval(p, contextostest.Approver{UserID: "user_finance_lead_77", Role: "finance_lead"}, clock.Now())
		a.Denied = kind == "deny"
		a.Reason = sc.with("checked", "host.approval_reason")
		return []gateway.Approval{a}
	}

	// The first runtime, which may freeze in a planner turn and be taken
	// over.
	type answerT struct {
		res *contextos.Result
		err error
	}
	done := make(chan answerT, 1)
	planner.first.Store(true)
	go func() {
		res, err := stream(h.Runtime.Stream(ctx, req, rc))
		done <- answerT{res, err}
	}()
	var res *contextos.Result
	var frozen, refused bool
	select {
	case a := <-done:
		res, refused = a.res, a.err != nil
	case <-planner.entered:
		frozen = true
	}
	planner.first.Store(false)
	if frozen {
		stats["takeovers"]++
		clock.Advance(contextos.DefaultHeartbeatTTL)
		st, err := loadState(ctx, ck.InMemoryCheckpoints, runID)
		if err != nil {
			t.Fatalf("the frozen run's checkpoint: %v", err)
		}
		in := contextos.ResumeInput{Takeover: st.Active, Approvals: answer(st.Pending)}
		res, _ = stream(h.Runtime.ResumeStream(ctx, runID, in))
	}
	for range 8 {
		if res == nil {
			break
		}
		st, err := loadState(ctx, ck.InMemoryCheckpoints, runID)
		if err != nil || st.Terminal {
			break
		}
		if res.Status == decision.Deferred {
			pending()
			stats["pauses"]++
			res, _ = stream(h.Runtime.ResumeStream(ctx, runID, contextos.ResumeInput{Approvals: answer(res.Pending)}))
			continue
		}
		if st.Stopped == "" || stats["resumed_stops"] >= sc.ResumeStops {
			break
		}
		stats["resumed_stops"]++
		res, _ = stream(h.Runtime.ResumeStream(ctx, runID, contextos.ResumeInput{}))
	}
	if res != nil {
		stats["runs_"+string(res.Status)]++
		if os.Getenv("CONTEXTOS_LEAK_DEBUG") != "" {
			why, _, _ := strings.Cut(res.Record.Rationale.Summary, ":")
			stats["why_"+string(res.Status)+"_"+why]++
			var steps []string
			for _, e := range transcript.Entries() {
				if e.Result != nil {
					steps = append(steps, e.Result.CapabilityID+"="+string(e.Result.Status))
				}
			}
			t.Logf("amount %d turns %v: %s %v", sc.Amount, sc.Turns, res.Status, steps)
		}
	}
	// The frozen runtime comes back to stores that refuse it.
	close(planner.release)
	if frozen {
		<-done
	}

	// The stored surfaces.
	recs, err := h.Decisions.List(ctx, decision.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	surf.add("record", recs)
	surf.add("transcript", transcript.Entries())
	for _, id := range h.PacketIDs() {
		p, err := pks.Get(ctx, id)
		if err != nil {
			t.Fatalf("packet %s: %v", id, err)
		}
		surf.add("packet", p)
		// A replay's report (its diffs quote what differs) is a surface
		// too; the host critic counts its calls, so a replay may differ.
		rep, err := h.Runtime.Replay(ctx, p)
		if err != nil {
			surf.add("error", err.Error())
		} else {
			surf.add("replay report", rep)
			stats["replays_"+string(rep.Status)]++
		}
	}
	surf.add("memory", mem.Proposals())
	surf.add("log", logs.String())
	surf.add("span", leakSpans(spans.GetSpans()))
	surf.add("metric", leakMetrics(t, reader))
	if refused {
		stats["refused"]++
	} else if surf.n["checkpoint"] == 0 || surf.n["record"] == 0 || len(spans.GetSpans()) == 0 {
		t.Fatalf("%v surfaces, %d spans: the run left too little to check", surf.n, len(spans.GetSpans()))
	}

	checkLeaks(t, sc, surf.m)
	if t.Failed() {
		t.Logf("scenario (rerun with -run 'TestNothingLeaksGeneratedRuns/cases/case_%04d$'):\n%s", sc.Case, sc)
	}
	stats["runs"]++
	stats["plants"] += len(sc.Plants)
	stats["surfaces"] += len(surf.m)
	return stats
}

// checkLeaks fails the test for each surface that holds a planted secret
// it may not hold.
func checkLeaks(t *testing.T, sc *leakScenario, surfaces map[string][]byte) {
	t.Helper()
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range surfaces {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		b := surfaces[name]
		kind, _, _ := strings.Cut(name, " #")
		var squeezed string
		for _, p := range sc.Plants {
			if !leakPromised(sc, p, kind) {
				continue
			}
			for _, n := range p.Needles {
				if bytes.Contains(b, []byte(n)) {
					t.Errorf("%s holds the %s planted at %s (%q)", name, p.Kind, p.Where, n)
				}
			}
			for _, n := range p.Squeezed {
				if squeezed == "" {
					squeezed = leakSqueeze.Replace(string(b))
				}
				if strings.Contains(squeezed, n) && !bytes.Contains(b, []byte(n)) {
					t.Errorf("%s holds the %s planted at %s, with its separators (%q)", name, p.Kind, p.Where, n)
				}
			}
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for the log handler's writes from
// several runtimes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}
