package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/replay"
)

const panicSecret = "sk_live_PANIC_SECRET_4242"

type panickingCritic struct{ verify bool }

func (c panickingCritic) Verify(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	if c.verify {
		panic(panicSecret)
	}
	return contextos.Judgement{Verdict: contextos.VerdictOK}, nil
}

func (c panickingCritic) Score(context.Context, *contextos.CriticInput) (contextos.Judgement, error) {
	panic(panicSecret)
}

type panickingMemory struct{ recall bool }

func (m panickingMemory) Recall(context.Context, compiler.MemoryQuery) ([]compiler.MemoryItem, error) {
	if m.recall {
		panic(panicSecret)
	}
	return nil, nil
}

func (m panickingMemory) Propose(context.Context, []contextos.MemoryProposal) error {
	panic(panicSecret)
}

type panickingEvidence struct{}

func (panickingEvidence) Evidence(context.Context, compiler.EvidenceQuery) ([]compiler.EvidenceItem, error) {
	panic(panicSecret)
}

type panickingTokenizer struct{}

func (panickingTokenizer) Count(string) int { panic(panicSecret) }

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// No plug-in panic escapes Invoke; once the run has started it ends
// ESCALATED with a stored record, and the panic value reaches the log only.
func TestPluginPanicsEndTheRunWithARecord(t *testing.T) {
	memPlan := refundPlan(1200)
	memPlan.Memory = []contextos.MemoryProposal{{WriteClass: "preference", Content: "prefers app", Confidence: 0.9}}
	for _, tc := range []struct {
		name    string
		planner contextos.Planner
		opts    func(o *contextos.Options)
		// compile is true when the panic is before the run starts: Invoke
		// fails with a *PanicError and nothing ran.
		compile bool
		status  decision.Status
	}{
		{name: "planner", status: decision.Escalated,
			planner: contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) { panic(panicSecret) })},
		{name: "critic verify", status: decision.Escalated, opts: func(o *contextos.Options) { o.Critic = panickingCritic{verify: true} }},
		{name: "critic score", status: decision.Escalated, opts: func(o *contextos.Options) { o.Critic = panickingCritic{} }},
		{name: "memory propose", status: decision.Decided, planner: contextostest.NewPlanner(lookupPlan(), memPlan),
			opts: func(o *contextos.Options) { o.Memory = panickingMemory{} }},
		{name: "memory recall", compile: true, opts: func(o *contextos.Options) { o.Memory = panickingMemory{recall: true} }},
		{name: "evidence source", compile: true, opts: func(o *contextos.Options) { o.Evidence = panickingEvidence{} }},
		{name: "tokenizer", compile: true, opts: func(o *contextos.Options) { o.Tokenizer = panickingTokenizer{} }},
		{name: "adapter", status: decision.Escalated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			o := contextostest.Options{Runtime: contextos.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}}
			if tc.opts != nil {
				tc.opts(&o.Runtime)
			}
			planner := tc.planner
			if planner == nil {
				planner = contextostest.NewPlanner(lookupPlan(), refundPlan(1200))
			}
			h := bareHarness(t, planner, &o)
			skip := ""
			if tc.name == "adapter" {
				skip = "adp_payments"
				h.Adapter("adp_payments").On("issue_refund").Panic()
			}
			scriptDefaults(h, skip)
			req, rc := refundRequest(t, 1200, true)
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			if tc.compile {
				var pe *contextos.PanicError
				if !errors.As(err, &pe) || !errors.Is(err, contextos.ErrPanic) {
					t.Fatalf("Invoke = %v, want a *PanicError", err)
				}
				if strings.Contains(err.Error(), panicSecret) {
					t.Error("the error echoes the panic value")
				}
				if len(h.Transcript.Results()) != 0 {
					t.Error("tools ran although the compile failed")
				}
			} else {
				if err != nil {
					t.Fatalf("Invoke: %v", err)
				}
				contextostest.AssertStatus(t, res, tc.status)
				recs, err := h.Decisions.List(context.Background(), decision.Filter{RunID: res.RunID})
				if err != nil || len(recs) == 0 {
					t.Fatalf("no stored record (%v)", err)
				}
				b, _ := json.Marshal(recs)
				if bytes.Contains(b, []byte(panicSecret)) || bytes.Contains(b, []byte("goroutine ")) {
					t.Error("the record carries the panic value or a stack")
				}
				for _, id := range h.PacketIDs() {
					p, _ := h.Replays.Get(context.Background(), id)
					pb, _ := json.Marshal(p)
					if bytes.Contains(pb, []byte(panicSecret)) {
						t.Error("the replay packet carries the panic value")
					}
				}
				if n := h.ReplayAll(); tc.status == decision.Escalated && n == 0 {
					t.Error("an escalated run was not captured")
				}
			}
			if !strings.Contains(logs.String(), "goroutine ") {
				t.Error("the stack did not reach the log")
			}
			if strings.Contains(logs.String(), panicSecret) {
				t.Error("the panic value reached the log")
			}
		})
	}
}

// Every captured run replays equal whatever evidence and memory it had.
func TestReplayEqualWithAnyEvidenceAndMemory(t *testing.T) {
	var mem []compiler.MemoryItem
	if err := json.Unmarshal(readTestdata(t, "memory.support.json"), &mem); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts func(o *contextos.Options)
	}{
		{"no evidence source", func(o *contextos.Options) { o.Evidence = noEvidence{} }},
		{"empty evidence", func(o *contextos.Options) { o.Evidence = compiler.StaticEvidence{} }},
		{"nil evidence", func(o *contextos.Options) { o.Evidence = compiler.StaticEvidence(nil) }},
		{"recalled memory", func(o *contextos.Options) { o.Memory = newRawMemory(mem...) }},
		{"empty memory", func(o *contextos.Options) { o.Memory = contextos.NewInMemoryMemory() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := contextostest.Options{}
			tc.opts(&o.Runtime)
			if _, ok := o.Runtime.Evidence.(noEvidence); ok {
				o.Runtime.Evidence = nil
				// bareHarness fills in evidence when none is set: build
				// the harness without it.
				h := contextostest.New(t, contextostest.NewPlanner(lookupPlan(), deniedPlan()), [][]byte{readTestdata(t, "ctxpack.support-1.0.0.json")},
					&contextostest.Options{Runtime: contextos.Options{ReplaySampleRate: 1}, Scopes: map[string][]string{"adp_payments.issue_refund": {"payments.refund"}}})
				scriptDefaults(h, "")
				req, rc := refundRequest(t, 1200, false)
				res := h.Invoke(req, rc)
				replayThroughJSON(t, h, res)
				return
			}
			h := bareHarness(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), &o)
			scriptDefaults(h, "")
			req, rc := refundRequest(t, 1200, true)
			res := h.Invoke(req, rc)
			replayThroughJSON(t, h, res)
			// A runtime with no memory store replays the pinned memory too.
			bare := bareHarness(t, contextostest.NewPlanner(), nil)
			p := packetOf(t, h, res)
			out, err := bare.Runtime.Replay(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			contextostest.AssertReplayEqual(t, out)
		})
	}
}

type noEvidence struct{ compiler.StaticEvidence }

func packetOf(t *testing.T, h *contextostest.Harness, res *contextos.Result) *replay.Packet {
	t.Helper()
	if res.ReplayPacketID == "" {
		t.Fatal("no packet captured")
	}
	p, err := h.Replays.Get(context.Background(), res.ReplayPacketID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// replayThroughJSON replays the run's packet after a JSON round trip, as
// one read from a file is.
func replayThroughJSON(t *testing.T, h *contextostest.Harness, res *contextos.Result) {
	t.Helper()
	b, err := json.Marshal(packetOf(t, h, res))
	if err != nil {
		t.Fatal(err)
	}
	var p replay.Packet
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	out, err := h.Runtime.Replay(context.Background(), &p)
	if err != nil {
		t.Fatal(err)
	}
	contextostest.AssertReplayEqual(t, out)
}
