package pack

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCheckEnvironment(t *testing.T) {
	for _, tc := range []struct {
		env string
		ok  bool
	}{
		{"prod", true},
		{"eu-prod_2", true},
		{"p", true},
		{"a123456789012345678901234567890123456789012345678901234567890123", true}, // 64 bytes
		{"a1234567890123456789012345678901234567890123456789012345678901234", false},
		{"", false},
		{"Prod", false},
		{"1prod", false},
		{"-prod", false},
		{"prod.eu", false},
		{"prod/eu", false},
		{"..", false},
		{"prod\n", false},
		{"prød", false},
	} {
		err := CheckEnvironment(tc.env)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrEnvironment)) {
			t.Errorf("CheckEnvironment(%q) = %v, want ok=%t", tc.env, err, tc.ok)
		}
	}
}

func TestCheckEnvironmentDoesNotEchoTheName(t *testing.T) {
	err := CheckEnvironment("sk-live-SECRET value")
	if err == nil || fmt.Sprint(err) == "" || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("CheckEnvironment error %q repeats its input", err)
	}
}

func TestReviewRolesOption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  *ValidateOptions
		want  []ReviewRole
		error bool
	}{
		{"nil options: all four", nil, DefaultReviewRoles(), false},
		{"empty list: all four, never none", &ValidateOptions{ReviewRoles: []ReviewRole{}}, DefaultReviewRoles(), false},
		{"configured, repeats dropped", &ValidateOptions{ReviewRoles: []ReviewRole{RoleSecurity, "compliance", RoleSecurity}}, []ReviewRole{RoleSecurity, "compliance"}, false},
		{"not an identifier", &ValidateOptions{ReviewRoles: []ReviewRole{"Security"}}, nil, true},
		{"empty role", &ValidateOptions{ReviewRoles: []ReviewRole{""}}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.opts.Check()
			if tc.error {
				if !errors.Is(err, ErrReview) {
					t.Errorf("Check = %v, want ErrReview", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.opts.reviewRoles(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("reviewRoles = %v, want %v", got, tc.want)
			}
			if c := tc.opts.clone(); c != nil && fmt.Sprint(c.ReviewRoles) != fmt.Sprint(tc.opts.ReviewRoles) {
				t.Errorf("clone lost ReviewRoles: %v", c.ReviewRoles)
			}
		})
	}
}

func TestPinStack(t *testing.T) {
	t.Parallel()
	v := func(minor uint64) Ref { return Ref{ID: "p", Major: 1, Minor: minor} }
	pin := func(a PinAction, r Ref) Pin { return Pin{Action: a, Ref: r} }
	for _, tc := range []struct {
		name string
		h    []Pin
		want []Ref
	}{
		{"empty", nil, nil},
		{"pins push", []Pin{pin(ActionPin, v(1)), pin(ActionPin, v(2))}, []Ref{v(1), v(2)}},
		{"promotion changes nothing", []Pin{pin(ActionPin, v(1)), pin(ActionPromote, v(1))}, []Ref{v(1)}},
		{"rollback pops to its version", []Pin{pin(ActionPin, v(1)), pin(ActionPin, v(2)), pin(ActionPin, v(3)), pin(ActionRollback, v(1))}, []Ref{v(1)}},
		{"pin after rollback", []Pin{pin(ActionPin, v(1)), pin(ActionPin, v(2)), pin(ActionRollback, v(1)), pin(ActionPin, v(3))}, []Ref{v(1), v(3)}},
		{"a re-pin of an old version pushes it again", []Pin{pin(ActionPin, v(1)), pin(ActionPin, v(2)), pin(ActionPin, v(1))}, []Ref{v(1), v(2), v(1)}},
		{"rollback to a version not on the stack", []Pin{pin(ActionPin, v(1)), pin(ActionRollback, v(9))}, []Ref{v(9)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := pinStack(tc.h); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("pinStack = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPinChangeApply covers the decisions a store makes inside its
// transaction, including the races the public API cannot stage: a
// promotion or rollback whose pin moved after it was decided.
func TestPinChangeApply(t *testing.T) {
	t.Parallel()
	v1, v2 := Ref{ID: "p", Major: 1}, Ref{ID: "p", Major: 2}
	at := time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)
	published := func(r Ref) Entry { return Entry{Ref: r, State: StatePublished} }
	pinned := func(r Ref) Entry { return Entry{Ref: r, State: StatePinned} }
	last := func(seq int64, a PinAction, r Ref) Pin { return Pin{Env: "prod", Ref: r, Seq: seq, Action: a} }
	for _, tc := range []struct {
		name      string
		c         PinChange
		last      Pin
		target    Entry
		wantErr   error
		wantWrite bool
		wantState State
		wantSeq   int64
	}{
		{"first pin", PinChange{action: ActionPin, env: "prod", ref: v1, at: at}, Pin{}, published(v1), nil, true, StatePinned, 1},
		{"pin over another", PinChange{action: ActionPin, env: "prod", ref: v2, at: at}, last(1, ActionPin, v1), pinned(v2), nil, true, StatePinned, 2},
		{"pin of the current version", PinChange{action: ActionPin, env: "prod", ref: v1}, last(3, ActionPromote, v1), pinned(v1), nil, false, StatePinned, 3},
		{"pin of a draft", PinChange{action: ActionPin, env: "prod", ref: v1}, Pin{}, Entry{Ref: v1, State: StateDraft}, ErrTransition, false, StateDraft, 0},
		{"pin of a revoked version", PinChange{action: ActionPin, env: "prod", ref: v1}, Pin{}, Entry{Ref: v1, State: StateRevoked}, ErrTransition, false, StateRevoked, 0},
		{"promote as decided", PinChange{action: ActionPromote, env: "prod", ref: v1, expect: 1}, last(1, ActionPin, v1), pinned(v1), nil, true, StatePinned, 2},
		{"promote after the pin moved", PinChange{action: ActionPromote, env: "prod", ref: v1, expect: 1}, last(2, ActionPin, v2), pinned(v1), ErrPinConflict, false, StatePinned, 2},
		{"promote after a re-pin of the same version", PinChange{action: ActionPromote, env: "prod", ref: v1, expect: 1}, last(3, ActionPin, v1), pinned(v1), ErrPinConflict, false, StatePinned, 3},
		{"promote of a deprecated version", PinChange{action: ActionPromote, env: "prod", ref: v1, expect: 1}, last(1, ActionPin, v1), Entry{Ref: v1, State: StateDeprecated}, ErrTransition, false, StateDeprecated, 1},
		{"rollback as decided", PinChange{action: ActionRollback, env: "prod", ref: v1, from: v2, expect: 2}, last(2, ActionPin, v2), pinned(v1), nil, true, StatePinned, 3},
		{"rollback after the pin moved", PinChange{action: ActionRollback, env: "prod", ref: v1, from: v2, expect: 2}, last(3, ActionPromote, v2), pinned(v1), ErrPinConflict, false, StatePinned, 3},
		{"rollback to a version revoked meanwhile", PinChange{action: ActionRollback, env: "prod", ref: v1, from: v2, expect: 2}, last(2, ActionPin, v2), Entry{Ref: v1, State: StateRevoked}, ErrNoRollbackTarget, false, StateRevoked, 2},
		{"zero change", PinChange{}, Pin{}, Entry{}, ErrTransition, false, "", 0},
		{"entry of another version", PinChange{action: ActionPin, env: "prod", ref: v1}, Pin{}, published(v2), ErrTransition, false, StatePublished, 0},
		{"pin of another environment", PinChange{action: ActionPin, env: "prod", ref: v1}, Pin{Env: "staging", Ref: v2, Seq: 1}, published(v1), ErrTransition, false, StatePublished, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			next, e, write, err := tc.c.Apply(tc.last, tc.target)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || write {
					t.Fatalf("Apply = write %t, %v; want %v", write, err, tc.wantErr)
				}
				return
			}
			if err != nil || write != tc.wantWrite || e.State != tc.wantState || next.Seq != tc.wantSeq {
				t.Fatalf("Apply = %+v, %s, write %t, %v", next, e.State, write, err)
			}
			if write && (next.Previous != tc.last.Ref || next.Action != tc.c.action || next.Env != "prod" || !next.At.Equal(tc.c.at)) {
				t.Errorf("Apply pin = %+v", next)
			}
		})
	}
}

func TestVerifyErrorMatchesItsAction(t *testing.T) {
	hookErr := errors.New("evidence_manifest differs")
	for _, tc := range []struct {
		action PinAction
		want   error
		not    error
	}{
		{ActionPromote, ErrPromotionBlocked, ErrRollbackUnverified},
		{ActionRollback, ErrRollbackUnverified, ErrPromotionBlocked},
	} {
		err := error(&VerifyError{Action: tc.action, Env: "prod", Ref: Ref{ID: "p", Major: 1}, Err: hookErr})
		if !errors.Is(err, tc.want) || !errors.Is(err, hookErr) || errors.Is(err, tc.not) {
			t.Errorf("%s: %v matches the wrong sentinels", tc.action, err)
		}
		if want := fmt.Sprintf("%v: p@1.0.0 in prod: %v", tc.want, hookErr); err.Error() != want {
			t.Errorf("Error() = %q, want %q", err.Error(), want)
		}
	}
}

// plainRegistry is a Registry without the lifecycle capability.
type plainRegistry struct{ Registry }

func TestPublishNeedsALifecycleRegistry(t *testing.T) {
	reg := plainRegistry{NewMemoryRegistry(nil)}
	if _, err := Publish(t.Context(), reg, Ref{ID: "p", Major: 1}, "", Signoff{Reviewer: "a", Role: RoleData}); !errors.Is(err, ErrTransition) {
		t.Errorf("Publish on a registry without reviews = %v, want ErrTransition", err)
	}
}

func FuzzCheckEnvironment(f *testing.F) {
	for _, s := range []string{"prod", "", "Prod", "../x", "a-b_c", "prod\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, env string) {
		err := CheckEnvironment(env)
		if err != nil {
			if !errors.Is(err, ErrEnvironment) {
				t.Fatalf("error %v does not match ErrEnvironment", err)
			}
			return
		}
		// An accepted name is safe as a path element and a SQL value.
		if len(env) == 0 || len(env) > 64 || env[0] < 'a' || env[0] > 'z' {
			t.Fatalf("accepted %q", env)
		}
		for _, c := range []byte(env) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				t.Fatalf("accepted %q", env)
			}
		}
	})
}
