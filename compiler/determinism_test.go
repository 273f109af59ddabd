package compiler_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Same inputs, same bytes and hash, 1,000 times (on one Prepared, as the
// runtime uses it).
func TestDeterministic1000(t *testing.T) {
	s := canonicalScenario(t)
	p, err := compiler.Prepare(s.inputs(), &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := p.Compile(ctx, s.req, s.rc)
	want, _ := json.Marshal(first)
	for i := 0; i < 1000; i++ {
		cc, err := p.Compile(ctx, s.req, s.rc)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(cc)
		if !bytes.Equal(got, want) || cc.Hash() != first.Hash() {
			t.Fatalf("compile %d differs", i)
		}
	}
}

// Across processes: a child process compiles the same inputs and prints
// the hash and a digest of the bytes.
func TestDeterministicAcrossProcesses(t *testing.T) {
	if os.Getenv("CONTEXTOS_COMPILE_CHILD") == "1" {
		cc := canonicalScenario(t).compile(t)
		b, _ := json.Marshal(cc)
		fmt.Printf("RESULT %s %x\n", cc.Hash(), b)
		return
	}
	var outs []string
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDeterministicAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CONTEXTOS_COMPILE_CHILD=1", fmt.Sprintf("GODEBUG=randseednop=0,hashseed=%d", i))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "RESULT ") {
				outs = append(outs, line)
			}
		}
	}
	cc := canonicalScenario(t).compile(t)
	b, _ := json.Marshal(cc)
	want := fmt.Sprintf("RESULT %s %x", cc.Hash(), b)
	if len(outs) != 2 || outs[0] != want || outs[1] != want {
		t.Errorf("processes disagree: %d results", len(outs))
	}
}

// shuffleKeys re-encodes a JSON document with object keys in random order.
func shuffleKeys(t *testing.T, data []byte, rng *rand.Rand) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var write func(v any)
	write = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			buf.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					buf.WriteByte(',')
				}
				kb, _ := json.Marshal(k)
				buf.Write(kb)
				buf.WriteByte(':')
				write(x[k])
			}
			buf.WriteByte('}')
		case []any:
			buf.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					buf.WriteByte(',')
				}
				write(e)
			}
			buf.WriteByte(']')
		default:
			b, _ := json.Marshal(x)
			buf.Write(b)
		}
	}
	write(v)
	return buf.Bytes()
}

// Inputs whose JSON keys come in another order give the same hash.
func TestKeyOrderDoesNotMatter(t *testing.T) {
	want := canonicalScenario(t).compile(t).Hash()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		s := canonicalScenario(t)
		p, err := pack.Decode(shuffleKeys(t, read(t, "ctxpack.support-1.0.0.json"), rng))
		if err != nil {
			t.Fatal(err)
		}
		req, err := runcontext.DecodeInvokeRequest(shuffleKeys(t, read(t, "invoke.support-refund.json"), rng))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := runcontext.DecodeRunContext(shuffleKeys(t, read(t, "run-context.support.json"), rng))
		if err != nil {
			t.Fatal(err)
		}
		s.pack, s.req, s.rc = p, req, rc
		if got := s.compile(t).Hash(); got != want {
			t.Fatalf("shuffle %d: hash %s, want %s", i, got, want)
		}
	}
}

// Every input change moves the ledger_hash; only those that change what
// is compiled (prompt, manifests, controls, budget report) move the
// compiled_context_hash, and every change of the request's input does
// (seed 003: "change one input and the hash moves"): a member of
// input.context no rule reads included. Run-specific members (run, request
// and trace ids) and pack metadata move the ledger alone.
func TestWhichChangesMoveWhichHash(t *testing.T) {
	base := canonicalScenario(t).compile(t)
	content := map[string]func(s *scenario){
		"pack rule text":  func(s *scenario) { s.pack.PolicyLayer.PolicyBundles[0].PolicyDSL.Rules[0].Rationale += "." },
		"request message": func(s *scenario) { s.req.Input.Message += "!" },
		"safety mode":     func(s *scenario) { s.rc.SafetyMode = runcontext.Delegated },
		"bucket budget":   func(s *scenario) { s.rc.RunBudget.BucketTokens[runcontext.BucketMemory] = 1499 },
		"evidence content": func(s *scenario) {
			ev := s.opts.Evidence.(compiler.StaticEvidence)
			ev[1].Content += "."
			s.opts.Evidence = ev
		},
		"evidence removed": func(s *scenario) { s.opts.Evidence = s.opts.Evidence.(compiler.StaticEvidence)[1:] },
		"memory confidence": func(s *scenario) {
			m := s.opts.Memory.(compiler.StaticMemory)
			m[0].Confidence = 0.96
			s.opts.Memory = m
		},
		"currency":         func(s *scenario) { s.req.Input.Context["currency"] = "USD" },
		"pack timezone":    func(s *scenario) { s.pack.PackMeta.EnvironmentDefaults.Timezone = "Europe/Paris" },
		"identity refused": func(s *scenario) { s.req.Input.Context["identity_verified"] = false },
		"refund amount":    func(s *scenario) { s.req.Input.Context["refund_amount"] = 4201 },
		"unread context":   func(s *scenario) { s.req.Input.Context["note"] = "x" },
		"context removed":  func(s *scenario) { delete(s.req.Input.Context, "customer_id") },
		"channel":          func(s *scenario) { s.req.Input.Channel = "email" },
		"currency given, equal to the pack's default": func(s *scenario) {
			s.req.Input.Context["currency"] = s.pack.PackMeta.EnvironmentDefaults.Currency
		},
	}
	ledgerOnly := map[string]func(s *scenario){
		"pack description": func(s *scenario) { s.pack.PackMeta.Description = "x" },
		"request id":       func(s *scenario) { s.req.RequestID = "123e4567-e89b-12d3-a456-426614174000" },
		"run id":           func(s *scenario) { s.rc.RunID = "run_other" },
		"trace id": func(s *scenario) {
			s.req.Trace.TraceID, s.rc.TraceID, s.rc.TraceContext = "5bf92f3577b34da6a3ce929d0e0e4736", "5bf92f3577b34da6a3ce929d0e0e4736", nil
		},
	}
	seenC, seenL := map[string]string{base.Hash(): "base"}, map[string]string{base.ContextLedger.LedgerHash: "base"}
	for _, set := range []struct {
		changes map[string]func(s *scenario)
		content bool
	}{{content, true}, {ledgerOnly, false}} {
		for name, edit := range set.changes {
			s := canonicalScenario(t)
			edit(s)
			cc := s.compile(t)
			if err := cc.Verify(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if prev, dup := seenL[cc.ContextLedger.LedgerHash]; dup {
				t.Errorf("%s gives the same ledger_hash as %s", name, prev)
			}
			seenL[cc.ContextLedger.LedgerHash] = name
			if !set.content {
				if cc.Hash() != base.Hash() {
					t.Errorf("%s moves compiled_context_hash; it is not compiled content", name)
				}
				continue
			}
			if prev, dup := seenC[cc.Hash()]; dup {
				t.Errorf("%s gives the same compiled_context_hash as %s", name, prev)
			}
			seenC[cc.Hash()] = name
		}
	}
}
