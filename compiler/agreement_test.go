package compiler_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Compile refuses a request and run context that disagree, exactly as
// runcontext.Materialize does: the same members, the same check, a typed
// error naming the member.
func TestCompileRefusesDisagreeingRunContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(rc *runcontext.RunContext)
		path string
	}{
		{"tenant", func(rc *runcontext.RunContext) { rc.TenantID = "tenant_globex" }, "tenant_id"},
		{"session", func(rc *runcontext.RunContext) { rc.SessionID = "sess_other" }, "session_id"},
		{"trace", func(rc *runcontext.RunContext) { rc.TraceID = "5bf92f3577b34da6a3ce929d0e0e4736" }, "trace_id"},
		{"intent", func(rc *runcontext.RunContext) { rc.Intent = "support.cancel" }, "intent"},
		{"locale", func(rc *runcontext.RunContext) { rc.Locale = "fr-FR" }, "locale"},
		{"user", func(rc *runcontext.RunContext) { rc.User.UserID = "usr_other" }, "user.user_id"},
		{"agent urn", func(rc *runcontext.RunContext) { rc.Agent.AgentURN = "agent:contextos/other@1.0.0" }, "agent.agent_urn"},
		{"agent id", func(rc *runcontext.RunContext) { rc.Agent.AgentID = "agt_other" }, "agent.agent_id"},
		{"workload identity", func(rc *runcontext.RunContext) { rc.Agent.WorkloadIdentity = "spiffe://contextos/agents/other" }, "agent.workload_identity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := canonicalScenario(t)
			tt.edit(s.rc)
			_, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts)
			var ce *compiler.Error
			var ve *runcontext.ValidationError
			if !errors.As(err, &ce) || !errors.Is(err, compiler.ErrConflict) || !errors.Is(err, runcontext.ErrConflict) || !errors.As(err, &ve) {
				t.Fatalf("Compile = %v, want compiler.ErrConflict wrapping a runcontext conflict", err)
			}
			if len(ve.Problems) != 1 || ve.Problems[0].Path != tt.path || ve.Problems[0].Code != runcontext.CodeConflict {
				t.Fatalf("problems = %+v, want one conflict naming %s", ve.Problems, tt.path)
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("the message does not name %s: %v", tt.path, err)
			}
			// The same pair is refused by Materialize, with the same problem.
			_, merr := runcontext.Materialize(s.req, s.rc, nil)
			var mve *runcontext.ValidationError
			if !errors.As(merr, &mve) || len(mve.Problems) != 1 || mve.Problems[0] != ve.Problems[0] {
				t.Errorf("Materialize = %v; want the compiler's problem %+v", merr, ve.Problems[0])
			}
		})
	}
	// A run context leaving a member to the request compiles, as
	// Materialize fills it.
	s := canonicalScenario(t)
	s.rc.Locale = ""
	if _, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts); err != nil {
		t.Errorf("a run context without a locale: %v", err)
	}
}

// Ontology versions are semantic versions: 1.10.0 is not 1.9.0 and is
// later than it; an error about a missing ontology names the namespace and
// says how to declare it.
func TestOntologyVersionsAreSemantic(t *testing.T) {
	t.Parallel()
	compileWith := func(packVersion string, declared ...string) error {
		s := canonicalScenario(t)
		s.pack.IntelligenceRefs.Ontology.Version = packVersion
		s.opts.Ontologies = declared
		_, err := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts)
		return err
	}
	if err := compileWith("1.10.0", "ont.support@1.9.0", "ont.support@1.10.0"); err != nil {
		t.Errorf("1.10.0 declared: %v", err)
	}
	tests := []struct {
		name     string
		pack     string
		declared []string
		want     []string
	}{
		{"only an earlier version", "1.10.0", []string{"ont.support@1.9.0"}, []string{"ont.support", "1.10.0", "only at 1.9.0"}},
		{"only a later version", "1.9.0", []string{"ont.support@1.10.0"}, []string{"ont.support", "1.9.0", "only at 1.10.0"}},
		{"another namespace", "1.0.0", []string{"ont.billing@1.0.0"}, []string{"no version of ont.support"}},
		{"none", "1.0.0", nil, []string{"no version of ont.support"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := compileWith(tt.pack, tt.declared...)
			var ce *compiler.Error
			if !errors.Is(err, compiler.ErrOntology) || !errors.As(err, &ce) || ce.Stage != 4 {
				t.Fatalf("Compile = %v, want ErrOntology at stage 4", err)
			}
			for _, w := range append(tt.want, "Options.Ontologies", "--ontology ont.support@"+tt.pack) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
}

// The pack's environment_defaults (an overlay's included) fill the
// locale, currency and timezone the request leaves empty; the session
// block shows the run's, and the ledger records them and which were
// defaulted.
func TestEnvironmentDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		edit      func(s *scenario)
		want      compiler.LedgerEnvironment
		inSession string
	}{
		{"request locale, pack currency and timezone", func(s *scenario) {},
			compiler.LedgerEnvironment{Locale: "en-IN", Currency: "INR", Timezone: "Asia/Kolkata", Defaulted: []string{"currency", "timezone"}},
			`locale "en-IN", currency "INR" (pack default), timezone "Asia/Kolkata" (pack default). User message`},
		{"request sets all three", func(s *scenario) {
			s.req.Input.Context["currency"], s.req.Input.Context["timezone"] = "USD", "America/New_York"
		}, compiler.LedgerEnvironment{Locale: "en-IN", Currency: "USD", Timezone: "America/New_York"},
			`locale "en-IN", currency "USD", timezone "America/New_York"`},
		{"no locale anywhere: the pack's", func(s *scenario) {
			s.req.Input.Locale, s.rc.Locale = "", ""
			s.pack.PackMeta.EnvironmentDefaults.Locale = "hi-IN"
		}, compiler.LedgerEnvironment{Locale: "hi-IN", Currency: "INR", Timezone: "Asia/Kolkata", Defaulted: []string{"locale", "currency", "timezone"}},
			`locale "hi-IN" (pack default)`},
		{"run context locale before the pack's", func(s *scenario) {
			s.req.Input.Locale, s.rc.Locale = "", "en-GB"
			s.pack.PackMeta.EnvironmentDefaults.Locale = "hi-IN"
		}, compiler.LedgerEnvironment{Locale: "en-GB", Currency: "INR", Timezone: "Asia/Kolkata", Defaulted: []string{"currency", "timezone"}},
			`locale "en-GB", currency`},
		{"a blank currency is empty", func(s *scenario) { s.req.Input.Context["currency"] = "  " },
			compiler.LedgerEnvironment{Locale: "en-IN", Currency: "INR", Timezone: "Asia/Kolkata", Defaulted: []string{"currency", "timezone"}}, `currency "INR" (pack default)`},
		{"a non-string currency is not one", func(s *scenario) { s.req.Input.Context["currency"] = 42.0 },
			compiler.LedgerEnvironment{Locale: "en-IN", Currency: "INR", Timezone: "Asia/Kolkata", Defaulted: []string{"currency", "timezone"}}, `currency "INR" (pack default)`},
		{"an overlay's defaults", func(s *scenario) {
			s.opts.Overlays = []*pack.Overlay{{OverlayID: "ov_eu", Base: "ctxpack.support@1.0.0", Environment: "eu",
				EnvironmentDefaults: &pack.EnvironmentDefaults{Currency: "EUR", Timezone: "Europe/Paris"}}}
		}, compiler.LedgerEnvironment{Locale: "en-IN", Currency: "EUR", Timezone: "Europe/Paris", Defaulted: []string{"currency", "timezone"}},
			`currency "EUR" (pack default), timezone "Europe/Paris" (pack default)`},
		{"no defaults, nothing invented", func(s *scenario) { s.pack.PackMeta.EnvironmentDefaults = pack.EnvironmentDefaults{} },
			compiler.LedgerEnvironment{Locale: "en-IN"}, `locale "en-IN". User message`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := canonicalScenario(t)
			tt.edit(s)
			cc := s.compile(t)
			if diff := cmp.Diff(&tt.want, cc.ContextLedger.Environment); diff != "" {
				t.Errorf("ledger environment (-want +got):\n%s", diff)
			}
			var session string
			for _, b := range cc.CompiledPrompt.ContextBlocks {
				if b.BlockID == "session" {
					session = b.Content
				}
			}
			if !strings.Contains(session, tt.inSession) {
				t.Errorf("session block %q does not show %q", session, tt.inSession)
			}
		})
	}
}

// The ledger records the highest data classification of the input packs.
func TestDataClassificationInLedger(t *testing.T) {
	s := canonicalScenario(t)
	if got := s.compile(t).ContextLedger.DataClassification; got != pack.Internal {
		t.Errorf("data_classification = %q, want INTERNAL", got)
	}
	catalog := canonicalScenario(t).pack
	catalog.PackMeta.PackID, catalog.PackMeta.PackVersion = "decision-catalog.support", "2.1.0"
	catalog.ContractMeta.ContractName = "decision-catalog.support"
	catalog.PackMeta.DataClassification = pack.Restricted
	in := append(s.inputs(), compiler.Input{Ref: pack.MustParseRef("decision-catalog.support@2.1.0"), Pack: catalog})
	cc, err := compiler.Compile(ctx, in, s.req, s.rc, &s.opts)
	if err != nil {
		t.Fatal(err)
	}
	if cc.ContextLedger.DataClassification != pack.Restricted {
		t.Errorf("data_classification = %q, want the higher RESTRICTED", cc.ContextLedger.DataClassification)
	}
}
