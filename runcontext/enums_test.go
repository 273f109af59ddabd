package runcontext

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/contextos/contextos/internal/enums"
)

func TestApprovalModeOrder(t *testing.T) {
	modes := approvalModes[:]
	for i, a := range modes {
		if a.rank() != i || !a.Valid() {
			t.Errorf("%s.rank() = %d, want %d", a, a.rank(), i)
		}
		for j, b := range modes {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", a, b, got, want)
			}
			if got := a.AtMost(b); got != (i <= j) {
				t.Errorf("%s.AtMost(%s) = %v", a, b, got)
			}
		}
	}
	bogus := ApprovalMode("root")
	if bogus.Valid() || bogus.rank() != -1 || bogus.Compare(Destructive) != 1 || bogus.AtMost(Destructive) || ReadOnly.AtMost(bogus) {
		t.Error("unknown mode does not fail closed")
	}
	if MaxApprovalMode() != ReadOnly || MaxApprovalMode(Network, LocalWrite) != Network || MaxApprovalMode(Destructive, bogus) != bogus {
		t.Error("MaxApprovalMode wrong")
	}
	if ReadOnly.IsWrite() || !LocalWrite.IsWrite() {
		t.Error("IsWrite wrong")
	}
}

func TestApprovalModeJSON(t *testing.T) {
	for _, m := range approvalModes[:] {
		b, err := json.Marshal(m)
		if err != nil || string(b) != `"`+string(m)+`"` {
			t.Errorf("Marshal(%s) = %s, %v", m, b, err)
		}
		var got ApprovalMode
		if err := json.Unmarshal(b, &got); err != nil || got != m {
			t.Errorf("Unmarshal(%s) = %s, %v", b, got, err)
		}
		p, err := ParseApprovalMode(string(m))
		if err != nil || p != m {
			t.Errorf("Parse(%s) = %s, %v", m, p, err)
		}
	}
	var m ApprovalMode
	if err := json.Unmarshal([]byte(`"Destructive"`), &m); err == nil {
		t.Error("case-variant mode accepted")
	}
	if _, err := json.Marshal(ApprovalMode("nope")); err == nil {
		t.Error("unknown mode marshalled")
	}
	if _, err := ParseApprovalMode(""); !errors.Is(err, ErrInvalidEnum) {
		t.Errorf("Parse(\"\") = %v", err)
	}
}

func TestEnumsText(t *testing.T) {
	var mode Mode
	var k PrincipalKind
	var a AuthType
	var l Lifecycle
	for _, c := range []struct {
		u    interface{ UnmarshalText([]byte) error }
		good string
	}{{&mode, "long_running"}, {&k, "automation"}, {&a, "oidc"}, {&l, "retired"}} {
		if err := c.u.UnmarshalText([]byte(c.good)); err != nil {
			t.Errorf("UnmarshalText(%s) = %v", c.good, err)
		}
		if err := c.u.UnmarshalText([]byte("bogus")); !errors.Is(err, ErrInvalidEnum) {
			t.Errorf("UnmarshalText(bogus) = %v", err)
		}
	}
	if !BucketEvidence.Valid() || Bucket("x").Valid() || len(Buckets()) != 6 {
		t.Error("buckets wrong")
	}
}

// The schema generator reads internal/enums: its lists are this package's
// constants, in order.
func TestEnumListsMatchConstants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		got, want []string
	}{
		{"approval modes", strs(approvalModes[:]), enums.ApprovalModes()},
		{"modes", strs(modes()), enums.Modes()},
		{"principal kinds", strs(principalKinds()), enums.PrincipalKinds()},
		{"auth types", strs(authTypes()), enums.AuthTypes()},
		{"lifecycles", strs(lifecycles()), enums.Lifecycles()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("internal/enums (-want +got):\n%s", diff)
			}
		})
	}
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
