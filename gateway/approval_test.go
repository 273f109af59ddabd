package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// consumeLog is an ApprovalLog that records every Consume.
type consumeLog struct {
	gateway.ApprovalLog
	mu  sync.Mutex
	ids []string
}

func (l *consumeLog) Consume(ctx context.Context, id string) error {
	l.mu.Lock()
	l.ids = append(l.ids, id)
	l.mu.Unlock()
	return l.ApprovalLog.Consume(ctx, id)
}

func (l *consumeLog) consumed() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

func withApprovalLog(l gateway.ApprovalLog) fixtureOption {
	return func(f *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
		f.opts.Approvals = l
	}
}

// allowSelfApproval sets allow_self_approval on the pack's finance gate.
func allowSelfApproval(f *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
	f.editPack = func(p *pack.Pack) {
		for i := range p.PolicyLayer.ApprovalGates {
			p.PolicyLayer.ApprovalGates[i].AllowSelfApproval = true
		}
	}
}

// An approval that names no approver or has no id, or whose approver is
// the run's requesting user (unless the gate allows self-approval), is
// refused before it is consumed or the adapter runs.
func TestApprovalRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opt    fixtureOption // nil for none
		change func(*gateway.Approval)
		in     string // in the refusal's message; "" for an approval that is used
	}{
		{"no approver", nil, func(a *gateway.Approval) { a.Approver = "" }, "approver"},
		{"no approval id", nil, func(a *gateway.Approval) { a.ApprovalID = "" }, "approval_id"},
		{"no approver and no id", nil, func(a *gateway.Approval) { a.Approver, a.ApprovalID = "", "" }, "approval_id"},
		{"self-approval", nil, func(a *gateway.Approval) { a.Approver = "usr_771" }, "requesting user"},
		// Names are compared after Unicode normalization: a zero-width
		// space, a bidi control, full-width letters or another case do not
		// make the requester someone else.
		{"self-approval with a zero-width space", nil, func(a *gateway.Approval) { a.Approver = "usr_771\u200b" }, "requesting user"},
		{"self-approval behind a bidi control", nil, func(a *gateway.Approval) { a.Approver = "\u202eusr_771" }, "requesting user"},
		{"self-approval in full-width letters", nil, func(a *gateway.Approval) { a.Approver = "\uff55\uff53\uff52_771" }, "requesting user"},
		{"self-approval in another case", nil, func(a *gateway.Approval) { a.Approver = " USR_771 " }, "requesting user"},
		{"an approver of only invisible characters", nil, func(a *gateway.Approval) { a.Approver = "\u200b\u2060" }, "names no approver"},
		{"self-approval allowed by the gate", allowSelfApproval, func(a *gateway.Approval) { a.Approver = "usr_771" }, ""},
		{"another approver", nil, func(*gateway.Approval) {}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &consumeLog{ApprovalLog: gateway.NewMemoryApprovalLog()}
			opts := []fixtureOption{withApprovalLog(log)}
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			f := newFixture(t, opts...)
			if f.rc.User.UserID != "usr_771" {
				t.Fatalf("the run's user is %q", f.rc.User.UserID)
			}
			paused, err := f.run.Call(ctx, refundCall(4200))
			if err != nil || paused.Status != gateway.StatusPaused {
				t.Fatalf("refund = %+v, %v", paused, err)
			}
			req := refundCall(4200)
			req.Approval = approvalFor(paused, "finance_lead", f.now.Add(-time.Minute), "apr_1")
			tc.change(req.Approval)
			res, err := f.run.Call(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.in == "" {
				if res.Status != gateway.StatusCompleted || res.Metadata.Approver != req.Approval.Approver || res.Metadata.ApprovalID != "apr_1" {
					t.Errorf("approved refund = %s %+v, metadata %+v", res.Status, res.Error, res.Metadata)
				}
				if got := log.consumed(); len(got) != 1 || got[0] != "tenant_acme_prod/apr_1" { // ids are used once per tenant
					t.Errorf("consumed %v, want [tenant_acme_prod/apr_1]", got)
				}
				if n := f.payments.CallCount("issue_refund"); n != 1 {
					t.Errorf("the adapter ran %d times, want once", n)
				}
				return
			}
			if res.Status != gateway.StatusBlocked || res.Error == nil || res.Error.Code != gateway.CodeApprovalDenied || res.Error.Retryable || !strings.Contains(res.Error.Message, tc.in) {
				t.Errorf("result = %s %+v, want blocked %s naming %q", res.Status, res.Error, gateway.CodeApprovalDenied, tc.in)
			}
			if got := log.consumed(); len(got) != 0 {
				t.Errorf("a refused approval was consumed: %v", got)
			}
			if n := f.payments.CallCount("issue_refund"); n != 0 {
				t.Errorf("a refused approval reached the adapter (%d calls)", n)
			}
			if res.Metadata.ApprovalID != "" || res.Metadata.Approver != "" {
				t.Errorf("a refused approval is on the result's metadata: %+v", res.Metadata)
			}
		})
	}
}

// The approval id is on the result's metadata, returned and recorded, so
// the record can list every approval a run used.
func TestApprovalIDOnResult(t *testing.T) {
	f := newFixture(t)
	paused, _ := f.run.Call(ctx, refundCall(4200))
	req := refundCall(4200)
	req.Approval = approvalFor(paused, "finance_lead", f.now, "apr_77")
	done, err := f.run.Call(ctx, req)
	if err != nil || done.Status != gateway.StatusCompleted || done.Metadata.ApprovalID != "apr_77" {
		t.Fatalf("approved refund = %s, metadata %+v, %v", done.Status, done.Metadata, err)
	}
	results := f.recorder.Results()
	if rec := results[len(results)-1]; rec.ToolCallID != done.ToolCallID || rec.Metadata.ApprovalID != "apr_77" {
		t.Errorf("recorded metadata = %+v, want approval_id apr_77", rec.Metadata)
	}
	b, err := canon.JSON(done.Metadata)
	if err != nil || !strings.Contains(string(b), `"approval_id":"apr_77"`) {
		t.Errorf("canonical metadata = %s, %v", b, err)
	}
}
