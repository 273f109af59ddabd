package compiler_test

import (
	"errors"
	"testing"

	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/pack"
)

// Prepare (and so Compile) checks every pack's compatibility.requires
// against the host (stage 2): by default the module's runtime contract
// version and the declared ontologies; Options.Host when set.
func TestPrepareChecksCompatibility(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		requires map[string]string
		host     pack.Host
		wantErr  bool
	}{
		{"the seed's requirements, default host", nil, nil, false},
		{"a later runtime", map[string]string{"runtime": ">=2.0.0", "ontology": ">=1.0.0"}, nil, true},
		{"a later runtime the host declares", map[string]string{"runtime": ">=2.0.0", "ontology": ">=1.0.0"}, pack.Host{"runtime": "2.1.0", "ontology": "1.0.0"}, false},
		{"a later ontology", map[string]string{"runtime": ">=1.0.0", "ontology": ">=1.1.0"}, nil, true},
		{"a component the host does not declare", map[string]string{"runtime": ">=1.0.0", "graph": ">=1.0.0"}, nil, true},
		{"a host that declares no ontology", nil, pack.Host{"runtime": "1.0.0"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := canonicalScenario(t)
			if tc.requires != nil {
				s.pack.ContractMeta.Compatibility.Requires = tc.requires
			}
			s.opts.Host = tc.host
			_, err := compiler.Prepare(s.inputs(), &s.opts)
			_, cerr := compiler.Compile(ctx, s.inputs(), s.req, s.rc, &s.opts)
			for _, err := range []error{err, cerr} {
				var ce *compiler.Error
				switch {
				case !tc.wantErr && err != nil:
					t.Errorf("= %v, want it compatible", err)
				case tc.wantErr && (!errors.Is(err, compiler.ErrIncompatible) || !errors.Is(err, pack.ErrIncompatible) || !errors.As(err, &ce) || ce.Stage != 2):
					t.Errorf("= %v, want ErrIncompatible at stage 2", err)
				}
			}
		})
	}
}

// An input's content hash is the hash it was verified under: a pack
// changed since (its signature would no longer verify) is refused.
func TestPrepareRefusesChangedContent(t *testing.T) {
	t.Parallel()
	s := canonicalScenario(t)
	in := s.inputs()
	h, err := pack.ContentHash(in[0].Pack)
	if err != nil {
		t.Fatal(err)
	}
	in[0].ContentHash = h
	if _, err := compiler.Prepare(in, &s.opts); err != nil {
		t.Fatalf("Prepare with its own content hash = %v", err)
	}
	in[0].Pack.PolicyLayer.ApprovalGates[0].RequiredApproverRole = "support_agent"
	_, err = compiler.Prepare(in, &s.opts)
	var ce *compiler.Error
	if !errors.Is(err, pack.ErrSignature) || !errors.Is(err, compiler.ErrInput) || !errors.As(err, &ce) || ce.Stage != 2 {
		t.Errorf("Prepare of a changed pack = %v, want ErrInput (pack.ErrSignature) at stage 2", err)
	}
}
