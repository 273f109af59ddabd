package runcontext

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestApprovalModeOrder(t *testing.T) {
	modes := ApprovalModes()
	for i, a := range modes {
		if a.Rank() != i || !a.Valid() {
			t.Errorf("%s.Rank() = %d, want %d", a, a.Rank(), i)
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
	if bogus.Valid() || bogus.Rank() != -1 || bogus.Compare(Destructive) != 1 || bogus.AtMost(Destructive) || ReadOnly.AtMost(bogus) {
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
	for _, m := range ApprovalModes() {
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
