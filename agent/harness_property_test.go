package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/contextos/contextos/agent"
)

// outcome is how a generated driver ends.
type outcome int

const (
	outSuccess outcome = iota
	outBackendError
	outRawError
	outPanic
	outBlock // blocks until its context is done
)

// consumer is what a generated consumer does.
type consumer int

const (
	consDrain consumer = iota
	consCloseAfter
	consCancelAfter
	consCancelConcurrently
	consParentCancel
)

type plan struct {
	events   []agent.Event
	outcome  outcome
	consumer consumer
	after    int // events read before the consumer acts
	cancelOK bool
}

func genPlan(r *rand.Rand) plan {
	p := plan{outcome: outcome(r.IntN(5)), consumer: consumer(r.IntN(5)), cancelOK: r.IntN(4) != 0}
	n := r.IntN(3 * agent.EventBuffer)
	kinds := []agent.EventKind{agent.EventTextOutput, agent.EventStatus, agent.EventToolCall, agent.EventToolResult, agent.EventUnknown, "bogus"}
	for i := range n {
		ev := agent.Event{Kind: kinds[r.IntN(len(kinds))], Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		switch r.IntN(20) {
		case 0:
			ev.Text = strings.Repeat("😀x", agent.MaxTextBytes/5+r.IntN(1000))
		case 1:
			ev.Message = strings.Repeat("é", agent.MaxMessageBytes)
		case 2:
			ev.Channel = strings.Repeat("c", 100+r.IntN(60))
		default:
			ev.Text = fmt.Sprintf("t%d", i)
			ev.Message = fmt.Sprintf("m%d", i)
		}
		p.events = append(p.events, ev)
	}
	if n > 0 {
		p.after = r.IntN(n + 1)
	}
	if !p.cancelOK && (p.consumer == consCancelAfter || p.consumer == consCancelConcurrently) && p.outcome == outBlock {
		p.outcome = outSuccess // nothing else would end it
	}
	if p.outcome == outBlock && p.consumer == consDrain {
		p.consumer = consParentCancel
	}
	if p.outcome == outBlock && p.consumer == consCloseAfter {
		p.consumer = consParentCancel
	}
	return p
}

// TestRunInvariantsProperty plays many generated runs (event counts and
// sizes, driver errors and panics, Close and Cancel at random points) and
// checks the run protocol's invariants on each.
func TestRunInvariantsProperty(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	runs := 400
	if testing.Short() {
		runs = 60
	}
	for seed := range runs {
		r := rand.New(rand.NewPCG(uint64(seed), 2))
		p := genPlan(r)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkPlan(t, p) })
		if t.Failed() {
			t.Fatalf("seed %d: plan outcome %d consumer %d after %d of %d events", seed, p.outcome, p.consumer, p.after, len(p.events))
		}
	}
}

func checkPlan(t *testing.T, p plan) {
	caps := agent.NewCapabilities(agent.CapRun, agent.CapEvents)
	if p.cancelOK {
		caps = caps.With(agent.CapCancel)
	}
	ctx, cancelParent := context.WithCancel(context.Background())
	defer cancelParent()
	var returned atomic.Bool
	run := agent.Start(ctx, agent.RunConfig{Kind: hk, Capabilities: caps}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		defer returned.Store(true)
		for _, ev := range p.events {
			out.Emit(ev)
		}
		switch p.outcome {
		case outBackendError:
			return agent.Completion{FinalText: secret}, agent.BackendError("session not found", errors.New(secret))
		case outRawError:
			return agent.Completion{}, errors.New(secret)
		case outPanic:
			panic(secret)
		case outBlock:
			<-ctx.Done()
			return agent.Completion{Status: agent.ExitStatus{Code: -1, Signal: "killed"}}, nil
		}
		return agent.Completion{FinalText: "done", Data: json.RawMessage(`{"n":1}`)}, nil
	})

	var got []agent.Event
	cancelled := false
	next, stop := iter.Pull(run.Events())
	act := func() {
		switch p.consumer {
		case consCloseAfter:
			run.Close()
		case consCancelAfter:
			if err := run.Cancel(); (err == nil) != p.cancelOK {
				t.Errorf("Cancel() = %v with cancel advertised %v", err, p.cancelOK)
			}
			cancelled = p.cancelOK
		case consParentCancel:
			cancelParent()
			cancelled = true
		}
	}
	if p.consumer == consCancelConcurrently {
		go func() { _ = run.Cancel() }()
	}
	acted := false
	for {
		if !acted && len(got) >= p.after {
			act()
			acted = true
		}
		ev, ok := next()
		if !ok {
			break
		}
		got = append(got, ev)
	}
	stop()
	if !acted {
		act()
	}
	comp, err := run.Wait(context.Background())
	if !returned.Load() {
		t.Fatal("Wait resolved before the driver returned")
	}
	select {
	case <-run.Done():
	default:
		t.Fatal("Done open after Wait")
	}

	// Events: in order, bounded, payload rules, no secret.
	lastIdx, lastText := -1, map[int]*strings.Builder{}
	for i, ev := range got {
		checkEventRules(t, ev)
		if ev.Kind == agent.EventError {
			if i != len(got)-1 {
				t.Fatalf("an error event at %d of %d", i, len(got))
			}
			continue
		}
		var d struct{ I int }
		if bytes.HasPrefix(ev.Data, []byte(`{"i":`)) {
			if json.Unmarshal(ev.Data, &d) != nil {
				t.Fatalf("data %s", ev.Data)
			}
			if d.I != lastIdx && d.I != lastIdx+1 {
				t.Fatalf("event %d after %d: out of order or lost", d.I, lastIdx)
			}
			lastIdx = d.I
			if lastText[d.I] == nil {
				lastText[d.I] = &strings.Builder{}
			}
			lastText[d.I].WriteString(ev.Text)
		} else if string(ev.Data) != `{"dropped":{"reason":"oversize"}}` {
			t.Fatalf("data %s", ev.Data)
		}
	}
	if p.consumer == consDrain || (p.consumer == consCloseAfter && p.after > len(p.events)) {
		// Nothing stopped the stream: every event arrived, texts rejoin.
		if lastIdx != len(p.events)-1 {
			t.Fatalf("%d of %d events arrived", lastIdx+1, len(p.events))
		}
		for i, ev := range p.events {
			if ev.Kind == agent.EventTextOutput && lastText[i].String() != ev.Text {
				t.Fatalf("text of event %d does not rejoin", i)
			}
		}
	}

	// Completion.
	if err != nil {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q has the secret", err)
		}
		if !errors.Is(err, agent.ErrBackend) {
			t.Fatalf("error %v is not ErrBackend", err)
		}
	}
	isCancelled := errors.Is(err, agent.ErrCancelled)
	if isCancelled && err.Error() != "backend error: cancelled" {
		t.Fatalf("cancelled error %q", err)
	}
	if cancelled && p.outcome == outBlock && !isCancelled {
		t.Fatalf("a cancelled blocking run completed with %v", err)
	}
	failed := p.outcome == outBackendError || p.outcome == outRawError || p.outcome == outPanic
	if p.consumer == consDrain && !cancelled {
		switch {
		case failed:
			n := 0
			for _, ev := range got {
				if ev.Kind == agent.EventError {
					n++
				}
			}
			if err == nil || n != 1 || got[len(got)-1].Kind != agent.EventError || "backend error: "+got[len(got)-1].Message != err.Error() {
				t.Fatalf("failed run: %d error events, completion %v", n, err)
			}
		default:
			if err != nil || comp.FinalText != "done" || string(comp.Data) != `{"n":1}` {
				t.Fatalf("completion %+v, %v", comp, err)
			}
		}
	}
	if !cancelled && !failed && p.consumer != consCancelConcurrently && err != nil {
		t.Fatalf("a successful run completed with %v", err)
	}
	if b, _ := json.Marshal(comp); bytes.Contains(b, []byte(secret)) {
		t.Fatal("the completion has the secret")
	}
}

// checkEventRules checks one event's bounds and payload rules.
func checkEventRules(t *testing.T, ev agent.Event) {
	t.Helper()
	if ev.AgentKind != hk {
		t.Fatalf("agent kind %q", ev.AgentKind)
	}
	switch ev.Kind {
	case agent.EventTextOutput:
		if ev.Message != "" {
			t.Fatal("text_output with a message")
		}
	case agent.EventError:
		if ev.Text != "" || ev.Message == "" {
			t.Fatal("error event payload")
		}
	case agent.EventStatus, agent.EventToolCall, agent.EventToolResult, agent.EventUnknown:
		if ev.Text != "" {
			t.Fatalf("%s with text", ev.Kind)
		}
	default:
		t.Fatalf("kind %q", ev.Kind)
	}
	if len(ev.Channel) > agent.MaxChannelBytes || len(ev.Text) > agent.MaxTextBytes || len(ev.Message) > agent.MaxMessageBytes ||
		!utf8.ValidString(ev.Text) || !utf8.ValidString(ev.Message) || len(ev.Data) > agent.MaxDataBytes {
		t.Fatalf("event over its bounds: channel %d, text %d, message %d, data %d", len(ev.Channel), len(ev.Text), len(ev.Message), len(ev.Data))
	}
	b, err := json.Marshal(ev)
	if err != nil || bytes.Contains(b, []byte(secret)) {
		t.Fatalf("event JSON: %v / has the secret", err)
	}
}
