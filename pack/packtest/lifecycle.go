package packtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/pack"
)

// LifecycleFactory returns a fresh, empty LifecycleRegistry validating with
// opts and, for a durable registry, a function opening another handle on
// the same storage (as another process would); nil reopen for an
// in-memory registry.
type LifecycleFactory func(t *testing.T, opts *pack.ValidateOptions) (reg pack.LifecycleRegistry, reopen func(t *testing.T) pack.LifecycleRegistry)

// Clock is a manual clock for Deployments: Now returns the time set,
// Advance moves it. Safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// verifyCall is one call of a recording hook.
type verifyCall struct {
	Env string
	Ref pack.Ref
}

// hook is a VerifyFunc that records its calls and returns err (and runs
// during, if set, while verifying).
type hook struct {
	mu     sync.Mutex
	calls  []verifyCall
	err    error
	during func(ctx context.Context, env string, ref pack.Ref)
}

func (h *hook) verify(ctx context.Context, env string, ref pack.Ref) error {
	h.mu.Lock()
	h.calls = append(h.calls, verifyCall{env, ref})
	during, err := h.during, h.err
	h.mu.Unlock()
	if during != nil {
		during(ctx, env, ref)
	}
	return err
}

func (h *hook) got() []verifyCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// RunLifecycleTests checks the LifecycleRegistry contract — recorded,
// non-skippable reviews, per-environment pins, promotion blocked by the
// verification hook, rollback to the prior version through the hook,
// concurrent pins, and (for a durable registry) reading everything back
// through another handle — against registries from newRegistry, using
// base (a pack that passes every gate) to build versions.
func RunLifecycleTests(t *testing.T, base *pack.Pack, newRegistry LifecycleFactory) {
	t.Helper()
	s := &lifecycleSuite{ctx: context.Background(), base: base, newRegistry: newRegistry, signer: NewSigner(9), epoch: time.Date(2026, 5, 9, 0, 0, 0, 0, time.UTC)}
	for _, c := range lifecycleCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, s) })
	}
}

// lifecycleSuite is what RunLifecycleTests's cases share: the base pack,
// the registry constructor, a signer and the clocks' epoch. Each case
// builds its own registries from it.
type lifecycleSuite struct {
	ctx         context.Context
	base        *pack.Pack
	newRegistry LifecycleFactory
	signer      Signer
	epoch       time.Time
}

// fresh returns a fresh registry and deployments on a clock at the epoch.
func (s *lifecycleSuite) fresh(t *testing.T) (pack.LifecycleRegistry, *pack.Deployments, *Clock) {
	reg, _ := s.newRegistry(t, nil)
	clock := NewClock(s.epoch)
	d, err := pack.NewDeployments(reg, &pack.DeploymentOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return reg, d, clock
}

// publish stores and publishes the given versions of base.
func (s *lifecycleSuite) publish(t *testing.T, reg pack.Registry, versions ...string) []pack.Ref {
	t.Helper()
	var out []pack.Ref
	for _, v := range versions {
		out = append(out, Publish(t, reg, s.signer.Sign(t, WithVersion(t, s.base, v)), "rel-bot").Ref)
	}
	return out
}

// history is env's pin history of pack id, as "action:version".
func (s *lifecycleSuite) history(t *testing.T, d *pack.Deployments, env, id string) []string {
	t.Helper()
	h, err := d.History(s.ctx, pack.Slot{Env: env, PackID: id})
	if err != nil {
		t.Fatalf("History(%s): %v", env, err)
	}
	var out []string
	for i, p := range h {
		if p.Seq != int64(i+1) || p.Env != env {
			t.Errorf("history entry %d = seq %d env %q", i, p.Seq, p.Env)
		}
		out = append(out, fmt.Sprintf("%s:%s", p.Action, p.Ref.Version()))
	}
	return out
}

// lifecycleCases are the cases of RunLifecycleTests, in order; each
// starts from what it needs, fresh from the constructor.
var lifecycleCases = []struct {
	name string
	run  func(t *testing.T, s *lifecycleSuite)
}{
	{"ReviewRecordsWhoAndRole", lifecycleReviewRecordsWhoAndRole},
	{"OneReviewerOneRole", lifecycleOneReviewerOneRole},
	{"PublishAgainIsANoOp", lifecyclePublishAgainIsANoOp},
	{"ReviewRefusals", lifecycleReviewRefusals},
	{"ConfiguredReviewRoles", lifecycleConfiguredReviewRoles},
	{"PinsArePerEnvironment", lifecyclePinsArePerEnvironment},
	{"PinRefusals", lifecyclePinRefusals},
	{"PromotionBlockedByHook", lifecyclePromotionBlockedByHook},
	{"PromotionRacingAPin", lifecyclePromotionRacingAPin},
	{"RollbackRepinsThePriorVersion", lifecycleRollbackRepinsThePriorVersion},
	{"RollbackPassesOverRevokedVersions", lifecycleRollbackPassesOverRevokedVersions},
	{"RollbackWithAFailingReplay", lifecycleRollbackWithAFailingReplay},
	{"RollbackAfterAManualPin", lifecycleRollbackAfterAManualPin},
	{"RollbackNeverToTheCurrentVersion", lifecycleRollbackNeverToTheCurrentVersion},
	{"RevokedVersionIsNeitherPinnedNorPromoted", lifecycleRevokedVersionIsNeitherPinnedNorPromoted},
	{"RevokeRacingPins", lifecycleRevokeRacingPins},
	{"ConcurrentPins", lifecycleConcurrentPins},
	{"ReadBackThroughAnotherHandle", lifecycleReadBackThroughAnotherHandle},
}

func lifecycleReviewRecordsWhoAndRole(t *testing.T, s *lifecycleSuite) {
	ctx, base, signer, newRegistry := s.ctx, s.base, s.signer, s.newRegistry
	reg, _ := newRegistry(t, nil)
	e, err := reg.Put(ctx, signer.Sign(t, base))
	if err != nil {
		t.Fatal(err)
	}
	first := []pack.Signoff{{Reviewer: "ana@example.com", Role: pack.RoleArchitecture}, {Reviewer: "sec-team", Role: pack.RoleSecurity}}
	got, err := reg.Review(ctx, e.Ref, first...)
	if err != nil || got.State != pack.StateLinted || !slices.Equal(got.Reviews, first) {
		t.Fatalf("Review(two roles) = %s, %v; want linted with both sign-offs", show(got), err)
	}
	// Reviewed stays out of reach until every required role signed off.
	if _, err := reg.SetState(ctx, e.Ref, pack.StateReviewed, ""); !errors.Is(err, pack.ErrTransition) {
		t.Errorf("SetState(reviewed) with data and evaluation missing = %v, want ErrTransition", err)
	}
	// The same sign-off again is not recorded twice.
	if got, err = reg.Review(ctx, e.Ref, first[0]); err != nil || len(got.Reviews) != 2 {
		t.Errorf("repeated sign-off = %s, %v; want it recorded once", show(got), err)
	}
	rest := []pack.Signoff{{Reviewer: "dana", Role: pack.RoleData}, {Reviewer: "eve", Role: pack.RoleEvaluation}}
	got, err = reg.Review(ctx, e.Ref, rest...)
	want := slices.Concat(first, rest)
	if err != nil || got.State != pack.StateReviewed || !slices.Equal(got.Reviews, want) {
		t.Fatalf("Review(remaining roles) = %s, %v; want reviewed with %v", show(got), err, want)
	}
	if got, err = reg.Get(ctx, e.Ref); err != nil || !slices.Equal(got.Reviews, want) || got.State != pack.StateReviewed {
		t.Errorf("Get = %s, %v; want the sign-offs read back", show(got), err)
	}
	for _, to := range []pack.State{pack.StateSigned, pack.StatePublished} {
		if got, err := reg.SetState(ctx, e.Ref, to, ""); err != nil || got.State != to || !slices.Equal(got.Reviews, want) {
			t.Errorf("SetState(%s) = %s, %v", to, show(got), err)
		}
	}
	// Further sign-offs are refused once signed.
	if _, err := reg.Review(ctx, e.Ref, rest[0]); !errors.Is(err, pack.ErrReview) {
		t.Errorf("Review of a published version = %v, want ErrReview", err)
	}
}

func lifecycleOneReviewerOneRole(t *testing.T, s *lifecycleSuite) {
	ctx, base, signer, newRegistry := s.ctx, s.base, s.signer, s.newRegistry
	reg, _ := newRegistry(t, nil)
	e, err := reg.Put(ctx, signer.Sign(t, base))
	if err != nil {
		t.Fatal(err)
	}
	ana := pack.Signoff{Reviewer: "ana", Role: pack.RoleArchitecture}
	if _, err := reg.Review(ctx, e.Ref, ana); err != nil {
		t.Fatal(err)
	}
	// The same person in a second role, now or in the same review,
	// spelt the same or in another case: four sign-offs mean four
	// people. Nothing is recorded.
	for _, tc := range []struct {
		name string
		s    []pack.Signoff
	}{
		{"a second role later", []pack.Signoff{{Reviewer: "ana", Role: pack.RoleSecurity}}},
		{"another case", []pack.Signoff{{Reviewer: "ANA", Role: pack.RoleData}}},
		{"two roles in one review", []pack.Signoff{{Reviewer: "sam", Role: pack.RoleSecurity}, {Reviewer: "Sam", Role: pack.RoleData}}},
	} {
		if got, err := reg.Review(ctx, e.Ref, tc.s...); !errors.Is(err, pack.ErrReview) {
			t.Errorf("Review(%s) = %s, %v; want ErrReview", tc.name, show(got), err)
		}
	}
	if got, err := reg.Get(ctx, e.Ref); err != nil || !slices.Equal(got.Reviews, []pack.Signoff{ana}) {
		t.Errorf("after refused reviews Get = %s, %v; want only ana's sign-off", show(got), err)
	}
	if _, err := pack.Publish(ctx, reg, e.Ref, "go", pack.Signoff{Reviewer: "ana", Role: pack.RoleSecurity}, pack.Signoff{Reviewer: "ana", Role: pack.RoleData},
		pack.Signoff{Reviewer: "ana", Role: pack.RoleEvaluation}); !errors.Is(err, pack.ErrReview) {
		t.Errorf("Publish with ana in every role = %v, want ErrReview", err)
	}
	// A registry whose options allow it takes one reviewer in every role.
	small, _ := newRegistry(t, &pack.ValidateOptions{AllowMultiRoleReviewer: true})
	e, err = small.Put(ctx, signer.Sign(t, base))
	if err != nil {
		t.Fatal(err)
	}
	var all []pack.Signoff
	for _, r := range pack.DefaultReviewRoles() {
		all = append(all, pack.Signoff{Reviewer: "ana", Role: r})
	}
	if got, err := pack.Publish(ctx, small, e.Ref, "go", all...); err != nil || got.State != pack.StatePublished {
		t.Errorf("Publish with ana in every role, allowed = %s, %v", show(got), err)
	}
}

func lifecyclePublishAgainIsANoOp(t *testing.T, s *lifecycleSuite) {
	ctx, base, signer, newRegistry := s.ctx, s.base, s.signer, s.newRegistry
	reg, _ := newRegistry(t, nil)
	e, err := reg.Put(ctx, signer.Sign(t, base))
	if err != nil {
		t.Fatal(err)
	}
	team := Signoffs("rel")
	first, err := pack.Publish(ctx, reg, e.Ref, "release", team...)
	if err != nil || first.State != pack.StatePublished {
		t.Fatalf("Publish = %s, %v", show(first), err)
	}
	// The same release again (some of its sign-offs, in another
	// case) changes nothing and succeeds.
	again, err := pack.Publish(ctx, reg, e.Ref, "release again", team[1], pack.Signoff{Reviewer: "REL.architecture", Role: pack.RoleArchitecture})
	if err != nil || again.State != pack.StatePublished || again.Reason != "release" || !slices.Equal(again.Reviews, team) {
		t.Errorf("Publish again = %s, %v; want the published entry unchanged", show(again), err)
	}
	// A sign-off it was not published with is refused, and not recorded.
	if _, err := pack.Publish(ctx, reg, e.Ref, "release", pack.Signoff{Reviewer: "mallory", Role: pack.RoleSecurity}); !errors.Is(err, pack.ErrReview) {
		t.Errorf("Publish with another sign-off = %v, want ErrReview", err)
	}
	if got, err := reg.Get(ctx, e.Ref); err != nil || !slices.Equal(got.Reviews, team) || got.State != pack.StatePublished {
		t.Errorf("Get = %s, %v; want the entry as first published", show(got), err)
	}
	// A revoked version is not published again.
	if _, err := reg.SetState(ctx, e.Ref, pack.StateRevoked, "bad"); err != nil {
		t.Fatal(err)
	}
	if _, err := pack.Publish(ctx, reg, e.Ref, "release", team...); err == nil {
		t.Error("Publish of a revoked version succeeded")
	}
	// A Publish cut off after signing is completed by the next one.
	v2, err := reg.Put(ctx, signer.Sign(t, WithVersion(t, base, "1.0.1")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Review(ctx, v2.Ref, team...); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.SetState(ctx, v2.Ref, pack.StateSigned, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := pack.Publish(ctx, reg, v2.Ref, "release", team...); err != nil || got.State != pack.StatePublished {
		t.Errorf("Publish of a signed version = %s, %v; want published", show(got), err)
	}
}

func lifecycleReviewRefusals(t *testing.T, s *lifecycleSuite) {
	ctx, base, newRegistry := s.ctx, s.base, s.newRegistry
	reg, _ := newRegistry(t, nil)
	draft, err := reg.Put(ctx, Bare(t, base))
	if err != nil {
		t.Fatal(err)
	}
	ok := pack.Signoff{Reviewer: "ana", Role: pack.RoleSecurity}
	if _, err := reg.Review(ctx, draft.Ref, ok); !errors.Is(err, pack.ErrReview) {
		t.Errorf("Review of a draft = %v, want ErrReview (lint first)", err)
	}
	if _, err := reg.SetState(ctx, draft.Ref, pack.StateLinted, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    []pack.Signoff
	}{
		{"none", nil},
		{"empty reviewer", []pack.Signoff{{Role: pack.RoleSecurity}}},
		{"reviewer with spaces", []pack.Signoff{{Reviewer: "ana smith", Role: pack.RoleSecurity}}},
		{"role not required", []pack.Signoff{{Reviewer: "ana", Role: "legal"}}},
		{"role not an identifier", []pack.Signoff{{Reviewer: "ana", Role: "Security"}}},
		{"one bad among good", []pack.Signoff{ok, {Reviewer: "", Role: pack.RoleData}}},
	} {
		if _, err := reg.Review(ctx, draft.Ref, tc.s...); !errors.Is(err, pack.ErrReview) {
			t.Errorf("Review(%s) = %v, want ErrReview", tc.name, err)
		}
	}
	if got, err := reg.Get(ctx, draft.Ref); err != nil || len(got.Reviews) != 0 {
		t.Errorf("after refused reviews Get = %s, %v; want no sign-off recorded", show(got), err)
	}
	if _, err := reg.Review(ctx, pack.MustParseRef("nope@1.0.0"), ok); !errors.Is(err, pack.ErrNotFound) {
		t.Errorf("Review(unknown) = %v, want ErrNotFound", err)
	}
	// Back to draft withdraws the sign-offs: linting again needs a
	// new review.
	if _, err := reg.Review(ctx, draft.Ref, ok); err != nil {
		t.Fatal(err)
	}
	if got, err := reg.SetState(ctx, draft.Ref, pack.StateDraft, "rework"); err != nil || len(got.Reviews) != 0 {
		t.Errorf("SetState(draft) = %s, %v; want the sign-offs cleared", show(got), err)
	}
	if got, err := reg.Get(ctx, draft.Ref); err != nil || len(got.Reviews) != 0 {
		t.Errorf("Get after draft = %s, %v; want no sign-offs", show(got), err)
	}
}

func lifecycleConfiguredReviewRoles(t *testing.T, s *lifecycleSuite) {
	ctx, base, signer, newRegistry := s.ctx, s.base, s.signer, s.newRegistry
	reg, _ := newRegistry(t, &pack.ValidateOptions{ReviewRoles: []pack.ReviewRole{pack.RoleSecurity, "compliance"}})
	e, err := reg.Put(ctx, signer.Sign(t, base))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Review(ctx, e.Ref, pack.Signoff{Reviewer: "ana", Role: pack.RoleArchitecture}); !errors.Is(err, pack.ErrReview) {
		t.Errorf("sign-off in a role this registry does not require = %v, want ErrReview", err)
	}
	got, err := reg.Review(ctx, e.Ref, pack.Signoff{Reviewer: "ana", Role: pack.RoleSecurity})
	if err != nil || got.State != pack.StateLinted {
		t.Fatalf("Review(security) = %s, %v; want linted (compliance missing)", show(got), err)
	}
	got, err = reg.Review(ctx, e.Ref, pack.Signoff{Reviewer: "cora", Role: "compliance"})
	if err != nil || got.State != pack.StateReviewed {
		t.Errorf("Review(compliance) = %s, %v; want reviewed", show(got), err)
	}
	bad, _ := newRegistry(t, &pack.ValidateOptions{ReviewRoles: []pack.ReviewRole{"Not A Role"}})
	if _, err := bad.Put(ctx, signer.Sign(t, base)); !errors.Is(err, pack.ErrReview) {
		t.Errorf("registry with an invalid review role accepted a Put: %v", err)
	}
}

func lifecyclePinsArePerEnvironment(t *testing.T, s *lifecycleSuite) {
	ctx, base, signer, epoch, fresh, publish, history := s.ctx, s.base, s.signer, s.epoch, s.fresh, s.publish, s.history
	reg, d, clock := fresh(t)
	refs := publish(t, reg, "1.0.0", "1.1.0")
	v1, v2 := refs[0], refs[1]
	p, err := d.Pin(ctx, "prod", v1, "release 1")
	if err != nil || p.Ref != v1 || p.Env != "prod" || p.Seq != 1 || p.Action != pack.ActionPin || p.Previous != (pack.Ref{}) || p.Reason != "release 1" || !p.At.Equal(epoch) {
		t.Fatalf("Pin(prod, v1) = %+v, %v", p, err)
	}
	if e, err := reg.Get(ctx, v1); err != nil || e.State != pack.StatePinned {
		t.Errorf("v1 after its first pin = %s, %v; want pinned", show(e), err)
	}
	if _, err := d.Pinned(ctx, pack.Slot{Env: "staging", PackID: v1.ID}); !errors.Is(err, pack.ErrNotPinned) {
		t.Errorf("Pinned(staging) = %v; a pin in prod is not a pin in staging", err)
	}
	if ps, err := d.Pins(ctx, "staging"); err != nil || len(ps) != 0 {
		t.Errorf("Pins(staging) = %v, %v; want none", ps, err)
	}
	clock.Advance(time.Minute)
	if _, err := d.Pin(ctx, "staging", v2, ""); err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]pack.Ref{"prod": v1, "staging": v2} {
		got, err := d.Pinned(ctx, pack.Slot{Env: env, PackID: v1.ID})
		if err != nil || got.Ref != want {
			t.Errorf("Pinned(%s) = %+v, %v; want %s", env, got, err, want)
		}
		ps, err := d.Pins(ctx, env)
		if err != nil || len(ps) != 1 || ps[0].Ref != want {
			t.Errorf("Pins(%s) = %+v, %v; want one pin of %s", env, ps, err, want)
		}
	}
	// Pinning the current version again records nothing.
	if again, err := d.Pin(ctx, "prod", v1, "again"); err != nil || again.Seq != 1 {
		t.Errorf("re-Pin(prod, v1) = %+v, %v; want the existing pin", again, err)
	}
	clock.Advance(time.Minute)
	p2, err := d.Pin(ctx, "prod", v2, "release 2")
	if err != nil || p2.Seq != 2 || p2.Previous != v1 || !p2.At.Equal(epoch.Add(2*time.Minute)) {
		t.Errorf("Pin(prod, v2) = %+v, %v; want entry 2 replacing v1", p2, err)
	}
	if got := history(t, d, "prod", v1.ID); fmt.Sprint(got) != "[pin:1.0.0 pin:1.1.0]" {
		t.Errorf("prod history = %v", got)
	}
	if got := history(t, d, "dev", v1.ID); len(got) != 0 {
		t.Errorf("dev history = %v, want empty", got)
	}
	// A second pack pins independently and lists in id order.
	other := WithVersion(t, base, "3.0.0")
	other.PackMeta.PackID = "ctxpack.aaa"
	o := Publish(t, reg, signer.Sign(t, other), "rel-bot").Ref
	if _, err := d.Pin(ctx, "prod", o, ""); err != nil {
		t.Fatal(err)
	}
	if ps, err := d.Pins(ctx, "prod"); err != nil || len(ps) != 2 || ps[0].Ref != o || ps[1].Ref != v2 {
		t.Errorf("Pins(prod) = %+v, %v; want %s then %s", ps, err, o, v2)
	}
}

func lifecyclePinRefusals(t *testing.T, s *lifecycleSuite) {
	ctx, base, fresh, publish := s.ctx, s.base, s.fresh, s.publish
	reg, d, _ := fresh(t)
	v1 := publish(t, reg, "1.0.0")[0]
	draft, err := reg.Put(ctx, Bare(t, WithVersion(t, base, "2.0.0")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pin(ctx, "prod", draft.Ref, ""); !errors.Is(err, pack.ErrTransition) {
		t.Errorf("Pin(draft) = %v, want ErrTransition", err)
	}
	if _, err := d.Pin(ctx, "prod", pack.MustParseRef("nope@1.0.0"), ""); !errors.Is(err, pack.ErrNotFound) {
		t.Errorf("Pin(unknown) = %v, want ErrNotFound", err)
	}
	for _, env := range []string{"", "Prod", "../prod", "prod/eu", ".pins", "1prod", "prod eu", string(make([]byte, 65))} {
		if _, err := d.Pin(ctx, env, v1, ""); !errors.Is(err, pack.ErrEnvironment) {
			t.Errorf("Pin(env %q) = %v, want ErrEnvironment", env, err)
		}
		if _, err := d.Pins(ctx, env); !errors.Is(err, pack.ErrEnvironment) {
			t.Errorf("Pins(env %q) = %v, want ErrEnvironment", env, err)
		}
		if _, err := reg.PinHistory(ctx, pack.Slot{Env: env, PackID: v1.ID}); !errors.Is(err, pack.ErrEnvironment) {
			t.Errorf("PinHistory(env %q) = %v, want ErrEnvironment", env, err)
		}
	}
	if _, err := reg.SetState(ctx, v1, pack.StateDeprecated, "superseded"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pin(ctx, "prod", v1, ""); !errors.Is(err, pack.ErrTransition) {
		t.Errorf("Pin(deprecated) = %v, want ErrTransition", err)
	}
	if _, err := reg.ApplyPin(ctx, pack.PinChange{}); !errors.Is(err, pack.ErrEnvironment) && !errors.Is(err, pack.ErrTransition) && !errors.Is(err, pack.ErrNotFound) {
		t.Errorf("ApplyPin(zero change) = %v, want it refused", err)
	}
	if h, err := reg.PinHistory(ctx, pack.Slot{Env: "prod", PackID: v1.ID}); err != nil || len(h) != 0 {
		t.Errorf("history after refusals = %+v, %v; want empty", h, err)
	}
}

func lifecyclePromotionBlockedByHook(t *testing.T, s *lifecycleSuite) {
	ctx, epoch, fresh, publish, history := s.ctx, s.epoch, s.fresh, s.publish, s.history
	reg, d, clock := fresh(t)
	refs := publish(t, reg, "1.0.0", "1.1.0")
	v1, v2 := refs[0], refs[1]
	if _, err := d.Promote(ctx, "prod", v1, "", (&hook{}).verify); !errors.Is(err, pack.ErrNotPinned) {
		t.Errorf("Promote before any pin = %v, want ErrNotPinned", err)
	}
	if _, err := d.Pin(ctx, "prod", v1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Promote(ctx, "prod", v1, "", nil); !errors.Is(err, pack.ErrNoVerifier) {
		t.Errorf("Promote without a hook = %v, want ErrNoVerifier", err)
	}
	mismatch := errors.New("replay golden-7: policy_manifest differs")
	h := &hook{err: mismatch}
	_, err := d.Promote(ctx, "prod", v1, "", h.verify)
	var ve *pack.VerifyError
	if !errors.Is(err, pack.ErrPromotionBlocked) || !errors.Is(err, mismatch) || !errors.As(err, &ve) || ve.Ref != v1 || ve.Env != "prod" {
		t.Errorf("Promote with a failing replay = %v, want a *VerifyError matching ErrPromotionBlocked and the hook's error", err)
	}
	if errors.Is(err, pack.ErrRollbackUnverified) {
		t.Errorf("promotion error %v matches ErrRollbackUnverified", err)
	}
	if got := h.got(); fmt.Sprint(got) != fmt.Sprint([]verifyCall{{"prod", v1}}) {
		t.Errorf("hook calls = %v, want one for prod %s", got, v1)
	}
	if p, err := d.Pinned(ctx, pack.Slot{Env: "prod", PackID: v1.ID}); err != nil || p.Promoted() || p.Seq != 1 {
		t.Errorf("after a blocked promotion Pinned = %+v, %v; want the unpromoted pin", p, err)
	}
	if _, err := d.Promote(ctx, "prod", v2, "", (&hook{}).verify); !errors.Is(err, pack.ErrNotPinned) {
		t.Errorf("Promote of a version prod does not pin = %v, want ErrNotPinned", err)
	}
	if _, err := d.Promote(ctx, "staging", v1, "", (&hook{}).verify); !errors.Is(err, pack.ErrNotPinned) {
		t.Errorf("Promote in staging = %v, want ErrNotPinned", err)
	}
	clock.Advance(time.Hour)
	good := &hook{}
	p, err := d.Promote(ctx, "prod", v1, "observed 1000 runs", good.verify)
	if err != nil || !p.Promoted() || p.Ref != v1 || p.Seq != 2 || p.Previous != v1 || p.Reason != "observed 1000 runs" || !p.At.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("Promote = %+v, %v", p, err)
	}
	if len(good.got()) != 1 {
		t.Errorf("hook calls = %v, want 1", good.got())
	}
	again, err := d.Promote(ctx, "prod", v1, "", good.verify)
	if err != nil || again.Seq != 2 || len(good.got()) != 1 {
		t.Errorf("second Promote = %+v, %v (hook calls %d); want the same pin, no replay", again, err, len(good.got()))
	}
	if got := history(t, d, "prod", v1.ID); fmt.Sprint(got) != "[pin:1.0.0 promote:1.0.0]" {
		t.Errorf("prod history = %v", got)
	}
}

func lifecyclePromotionRacingAPin(t *testing.T, s *lifecycleSuite) {
	ctx, fresh, publish, history := s.ctx, s.fresh, s.publish, s.history
	reg, d, _ := fresh(t)
	refs := publish(t, reg, "1.0.0", "1.1.0")
	if _, err := d.Pin(ctx, "prod", refs[0], ""); err != nil {
		t.Fatal(err)
	}
	// While v1's replay runs, another operator pins v2: the
	// verification no longer speaks for prod's pin.
	h := &hook{during: func(ctx context.Context, env string, _ pack.Ref) {
		if _, err := d.Pin(ctx, env, refs[1], "hotfix"); err != nil {
			t.Error(err)
		}
	}}
	if _, err := d.Promote(ctx, "prod", refs[0], "", h.verify); !errors.Is(err, pack.ErrPinConflict) {
		t.Errorf("Promote across a concurrent pin = %v, want ErrPinConflict", err)
	}
	if got := history(t, d, "prod", refs[0].ID); fmt.Sprint(got) != "[pin:1.0.0 pin:1.1.0]" {
		t.Errorf("prod history = %v; want no promotion recorded", got)
	}
}

func lifecycleRollbackRepinsThePriorVersion(t *testing.T, s *lifecycleSuite) {
	ctx, fresh, publish, history := s.ctx, s.fresh, s.publish, s.history
	reg, d, clock := fresh(t)
	refs := publish(t, reg, "1.0.0", "1.1.0", "1.2.0")
	v1, v2, v3 := refs[0], refs[1], refs[2]
	if _, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: v1.ID}, "", (&hook{}).verify); !errors.Is(err, pack.ErrNotPinned) {
		t.Errorf("Rollback of an unpinned pack = %v, want ErrNotPinned", err)
	}
	for _, r := range refs {
		if _, err := d.Pin(ctx, "prod", r, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Pin(ctx, "staging", v3, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Promote(ctx, "prod", v3, "", (&hook{}).verify); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: v1.ID}, "", nil); !errors.Is(err, pack.ErrNoVerifier) {
		t.Errorf("Rollback without a hook = %v, want ErrNoVerifier", err)
	}
	// The golden replay of the restored version takes 7 s of clock.
	h := &hook{during: func(context.Context, string, pack.Ref) { clock.Advance(7 * time.Second) }}
	res, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: v1.ID}, "incident 42", h.verify)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Pin; p.Ref != v2 || p.Previous != v3 || p.Action != pack.ActionRollback || p.Reason != "incident 42" || p.Seq != 5 {
		t.Errorf("Rollback pin = %+v; want v2 restored in place of v3", p)
	}
	if res.Duration != 7*time.Second {
		t.Errorf("Rollback Duration = %v, want the 7s the replay took", res.Duration)
	}
	if got := h.got(); fmt.Sprint(got) != fmt.Sprint([]verifyCall{{"prod", v2}}) {
		t.Errorf("hook calls = %v, want the restored version's replay in prod", got)
	}
	if p, err := d.Pinned(ctx, pack.Slot{Env: "prod", PackID: v1.ID}); err != nil || p.Ref != v2 {
		t.Errorf("Pinned(prod) = %+v, %v; want v2", p, err)
	}
	// A second rollback walks further back, never to v3 again.
	res, err = d.Rollback(ctx, pack.Slot{Env: "prod", PackID: v1.ID}, "", h.verify)
	if err != nil || res.Pin.Ref != v1 || res.Pin.Previous != v2 {
		t.Errorf("second Rollback = %+v, %v; want v1", res.Pin, err)
	}
	if _, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: v1.ID}, "", h.verify); !errors.Is(err, pack.ErrNoRollbackTarget) {
		t.Errorf("Rollback past the first pin = %v, want ErrNoRollbackTarget", err)
	}
	if got := history(t, d, "prod", v1.ID); fmt.Sprint(got) != "[pin:1.0.0 pin:1.1.0 pin:1.2.0 promote:1.2.0 rollback:1.1.0 rollback:1.0.0]" {
		t.Errorf("prod history = %v", got)
	}
	// Staging was not touched.
	if got := history(t, d, "staging", v1.ID); fmt.Sprint(got) != "[pin:1.2.0]" {
		t.Errorf("staging history = %v", got)
	}
}

func lifecycleRollbackPassesOverRevokedVersions(t *testing.T, s *lifecycleSuite) {
	ctx, fresh, publish := s.ctx, s.fresh, s.publish
	reg, d, _ := fresh(t)
	refs := publish(t, reg, "1.0.0", "1.1.0", "1.2.0")
	for _, r := range refs {
		if _, err := d.Pin(ctx, "prod", r, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.SetState(ctx, refs[1], pack.StateRevoked, "bad threshold"); err != nil {
		t.Fatal(err)
	}
	res, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID}, "", (&hook{}).verify)
	if err != nil || res.Pin.Ref != refs[0] || res.Pin.Previous != refs[2] {
		t.Errorf("Rollback = %+v, %v; want v1 (v2 is revoked)", res.Pin, err)
	}
}

func lifecycleRollbackWithAFailingReplay(t *testing.T, s *lifecycleSuite) {
	ctx, fresh, publish := s.ctx, s.fresh, s.publish
	reg, d, _ := fresh(t)
	refs := publish(t, reg, "1.0.0", "1.1.0")
	for _, r := range refs {
		if _, err := d.Pin(ctx, "prod", r, ""); err != nil {
			t.Fatal(err)
		}
	}
	mismatch := errors.New("tool_manifest differs")
	res, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID}, "", (&hook{err: mismatch}).verify)
	var ve *pack.VerifyError
	if !errors.Is(err, pack.ErrRollbackUnverified) || !errors.Is(err, mismatch) || !errors.As(err, &ve) || ve.Ref != refs[0] {
		t.Errorf("Rollback with a failing replay = %v, want a *VerifyError matching ErrRollbackUnverified", err)
	}
	if errors.Is(err, pack.ErrPromotionBlocked) {
		t.Errorf("rollback error %v matches ErrPromotionBlocked", err)
	}
	// The re-pin stands: v2 is the suspect version.
	if p, err := d.Pinned(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID}); err != nil || p.Ref != refs[0] || res.Pin != p {
		t.Errorf("Pinned after an unverified rollback = %+v, %v (result %+v); want v1", p, err, res.Pin)
	}
}

func lifecycleRollbackAfterAManualPin(t *testing.T, s *lifecycleSuite) {
	ctx, fresh, publish := s.ctx, s.fresh, s.publish
	reg, d, _ := fresh(t)
	refs := publish(t, reg, "1.0.0", "1.1.0")
	if _, err := d.Pin(ctx, "prod", refs[0], ""); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pin(ctx, "prod", refs[1], ""); err != nil {
		t.Fatal(err)
	}
	// An operator pins v1 back by hand: that is a pin like any other,
	// so a rollback now undoes it.
	if _, err := d.Pin(ctx, "prod", refs[0], "manual"); err != nil {
		t.Fatal(err)
	}
	res, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID}, "", (&hook{}).verify)
	if err != nil || res.Pin.Ref != refs[1] {
		t.Errorf("Rollback after the manual pin = %+v, %v; want v2 (the version before the manual pin)", res.Pin, err)
	}
}

func lifecycleRollbackNeverToTheCurrentVersion(t *testing.T, s *lifecycleSuite) {
	ctx, fresh, publish, history := s.ctx, s.fresh, s.publish, s.history
	reg, d, _ := fresh(t)
	refs := publish(t, reg, "1.0.0", "1.1.0")
	for _, r := range []pack.Ref{refs[0], refs[1], refs[0]} {
		if _, err := d.Pin(ctx, "prod", r, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.SetState(ctx, refs[1], pack.StateRevoked, "bad threshold"); err != nil {
		t.Fatal(err)
	}
	h := &hook{}
	if res, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID}, "", h.verify); !errors.Is(err, pack.ErrNoRollbackTarget) {
		t.Errorf("Rollback with only the current version below = %+v, %v; want ErrNoRollbackTarget", res.Pin, err)
	}
	if got := history(t, d, "prod", refs[0].ID); !slices.Equal(got, []string{"pin:1.0.0", "pin:1.1.0", "pin:1.0.0"}) || len(h.got()) != 0 {
		t.Errorf("history after the refused rollback = %v (hook calls %v)", got, h.got())
	}
}

func lifecycleRevokedVersionIsNeitherPinnedNorPromoted(t *testing.T, s *lifecycleSuite) {
	ctx, fresh, publish := s.ctx, s.fresh, s.publish
	reg, d, _ := fresh(t)
	v1 := publish(t, reg, "1.0.0")[0]
	if _, err := d.Pin(ctx, "prod", v1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Promote(ctx, "prod", v1, "", (&hook{}).verify); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.SetState(ctx, v1, pack.StateRevoked, "leaks card numbers"); err != nil {
		t.Fatal(err)
	}
	if p, err := d.Pin(ctx, "prod", v1, ""); !errors.Is(err, pack.ErrTransition) {
		t.Errorf("Pin(revoked current version) = %+v, %v; want ErrTransition", p, err)
	}
	if p, err := d.Promote(ctx, "prod", v1, "", (&hook{}).verify); !errors.Is(err, pack.ErrTransition) {
		t.Errorf("Promote(revoked promoted version) = %+v, %v; want ErrTransition", p, err)
	}
}

func lifecycleRevokeRacingPins(t *testing.T, s *lifecycleSuite) {
	ctx, newRegistry, publish := s.ctx, s.newRegistry, s.publish
	// A revocation is never lost to a pin written at the same time,
	// through this handle or (for a durable registry) another one.
	reg, reopen := newRegistry(t, nil)
	other := reg
	if reopen != nil {
		other = reopen(t)
	}
	d, err := pack.NewDeployments(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for i := range 6 {
		versions = append(versions, fmt.Sprintf("3.%d.0", i))
	}
	refs := publish(t, reg, versions...)
	var wg sync.WaitGroup
	for _, r := range refs {
		for _, env := range []string{"prod", "staging", "canary"} {
			wg.Go(func() { _, _ = d.Pin(ctx, env, r, "") })
		}
		wg.Go(func() {
			if _, err := other.SetState(ctx, r, pack.StateRevoked, "recalled"); err != nil {
				t.Errorf("revoke %s: %v", r, err)
			}
		})
	}
	wg.Wait()
	for _, r := range refs {
		if e, err := reg.Get(ctx, r); err != nil || e.State != pack.StateRevoked {
			t.Errorf("%s after racing pins = %s, %v; want revoked", r, e.State, err)
		}
	}
}

func lifecycleConcurrentPins(t *testing.T, s *lifecycleSuite) {
	ctx, fresh, publish := s.ctx, s.fresh, s.publish
	reg, d, _ := fresh(t)
	var versions []string
	for i := range 8 {
		versions = append(versions, fmt.Sprintf("1.%d.0", i))
	}
	refs := publish(t, reg, versions...)
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(refs))
	for _, r := range refs {
		for _, env := range []string{"prod", "staging"} {
			wg.Go(func() {
				_, err := d.Pin(ctx, env, r, "")
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Pin: %v", err)
		}
	}
	for _, env := range []string{"prod", "staging"} {
		checkChain(t, reg, env, refs)
	}
}

func lifecycleReadBackThroughAnotherHandle(t *testing.T, s *lifecycleSuite) {
	ctx, epoch, newRegistry, publish := s.ctx, s.epoch, s.newRegistry, s.publish
	reg, reopen := newRegistry(t, nil)
	if reopen == nil {
		t.Skip("in-memory registry: nothing to reopen")
	}
	clock := NewClock(epoch)
	d, err := pack.NewDeployments(reg, &pack.DeploymentOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	refs := publish(t, reg, "1.0.0", "1.1.0")
	for _, r := range refs {
		clock.Advance(time.Second)
		if _, err := d.Pin(ctx, "prod", r, "rel"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Promote(ctx, "prod", refs[1], "ok", (&hook{}).verify); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Rollback(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID}, "incident", (&hook{}).verify); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pin(ctx, "staging", refs[1], ""); err != nil {
		t.Fatal(err)
	}
	wantHist, _ := reg.PinHistory(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID})
	wantEntry, _ := reg.Get(ctx, refs[0])
	other := reopen(t)
	gotEntry, err := other.Get(ctx, refs[0])
	if err != nil || gotEntry.State != wantEntry.State || !slices.Equal(gotEntry.Reviews, wantEntry.Reviews) || len(gotEntry.Reviews) != 4 {
		t.Errorf("entry through another handle = %s, %v; want %s", show(gotEntry), err, show(wantEntry))
	}
	gotHist, err := other.PinHistory(ctx, pack.Slot{Env: "prod", PackID: refs[0].ID})
	if err != nil || !samePins(gotHist, wantHist) || len(gotHist) != 4 {
		t.Errorf("prod history through another handle = %+v, %v; want %+v", gotHist, err, wantHist)
	}
	ps, err := other.Pins(ctx, "staging")
	if err != nil || len(ps) != 1 || ps[0].Ref != refs[1] {
		t.Errorf("staging pins through another handle = %+v, %v", ps, err)
	}
	// Two handles pinning at once keep one consistent history.
	od, err := pack.NewDeployments(other, &pack.DeploymentOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	more := publish(t, reg, "2.0.0", "2.1.0", "2.2.0", "2.3.0")
	var wg sync.WaitGroup
	for i, r := range more {
		dd := d
		if i%2 == 1 {
			dd = od
		}
		wg.Go(func() {
			if _, err := dd.Pin(ctx, "canary", r, ""); err != nil {
				t.Errorf("Pin through handle %d: %v", i%2, err)
			}
		})
	}
	wg.Wait()
	checkChain(t, other, "canary", more)
}

// checkChain checks env's history of refs' pack: one pin of each of refs
// in some order, seqs 1..n, each entry's Previous the entry before it.
func checkChain(t *testing.T, reg pack.LifecycleRegistry, env string, refs []pack.Ref) {
	t.Helper()
	h, err := reg.PinHistory(context.Background(), pack.Slot{Env: env, PackID: refs[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != len(refs) {
		t.Fatalf("%s history has %d entries, want %d: %+v", env, len(h), len(refs), h)
	}
	var seen []pack.Ref
	for i, p := range h {
		if p.Seq != int64(i+1) || p.Action != pack.ActionPin {
			t.Errorf("%s entry %d = %+v", env, i, p)
		}
		if i > 0 && p.Previous != h[i-1].Ref {
			t.Errorf("%s entry %d replaced %s, but %s was pinned", env, i, p.Previous, h[i-1].Ref)
		}
		seen = append(seen, p.Ref)
	}
	slices.SortFunc(seen, pack.Ref.Compare)
	want := slices.Clone(refs)
	slices.SortFunc(want, pack.Ref.Compare)
	if !slices.Equal(seen, want) {
		t.Errorf("%s history pins %v, want each of %v once", env, seen, want)
	}
	cur, err := reg.Pins(context.Background(), env)
	if err != nil || !samePins(cur, h[len(h)-1:]) {
		t.Errorf("%s current pin = %+v, %v; want the last entry %+v", env, cur, err, h[len(h)-1])
	}
}

// samePins compares pin histories, times by instant.
func samePins(a, b []pack.Pin) bool {
	return slices.EqualFunc(a, b, func(x, y pack.Pin) bool {
		xt, yt := x.At, y.At
		x.At, y.At = time.Time{}, time.Time{}
		return x == y && xt.Equal(yt)
	})
}
