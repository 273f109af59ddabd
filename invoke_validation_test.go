package contextos_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/runcontext"
)

// TestInvokeRefusesWhatMaterializeRefuses: Invoke validates a request once
// (Materialize's validation, which comes first): for every request and
// host context it refuses, its error is Materialize's, of the same type
// and with the same message, and a request Materialize refuses for itself
// is refused with req.Validate's error.
func TestInvokeRefusesWhatMaterializeRefuses(t *testing.T) {
	h := contextostest.New(t, contextostest.NewPlanner(lookupPlan(), refundPlan(1200)), [][]byte{readTestdata(t, "ctxpack.support-1.0.0.json")},
		&contextostest.Options{Runtime: contextos.Options{Evidence: evidence(t)}})
	scriptDefaults(h, "")
	for _, tc := range []struct {
		name string
		edit func(req *runcontext.InvokeRequest, rc *runcontext.RunContext) (*runcontext.InvokeRequest, *runcontext.RunContext)
		// invalidRequest: the request itself is invalid.
		invalidRequest bool
	}{
		{"nil request", func(*runcontext.InvokeRequest, *runcontext.RunContext) (*runcontext.InvokeRequest, *runcontext.RunContext) {
			return nil, nil
		}, true},
		{"empty request", func(*runcontext.InvokeRequest, *runcontext.RunContext) (*runcontext.InvokeRequest, *runcontext.RunContext) {
			return &runcontext.InvokeRequest{}, nil
		}, true},
		{"bad mode and no message, with a conflicting host", func(req *runcontext.InvokeRequest, rc *runcontext.RunContext) (*runcontext.InvokeRequest, *runcontext.RunContext) {
			req.Mode, req.Input.Message = "sideways", " "
			rc.TenantID = "t_other"
			return req, rc
		}, true},
		{"a host that disagrees", func(req *runcontext.InvokeRequest, rc *runcontext.RunContext) (*runcontext.InvokeRequest, *runcontext.RunContext) {
			rc.TenantID, rc.Intent = "t_other", "other_intent"
			return req, rc
		}, false},
		{"an invalid host", func(req *runcontext.InvokeRequest, rc *runcontext.RunContext) (*runcontext.InvokeRequest, *runcontext.RunContext) {
			rc.SafetyMode = "everything"
			return req, rc
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, rc := tc.edit(refundRequest(t, 1200, true))
			_, want := runcontext.Materialize(req, rc, nil)
			if want == nil {
				t.Fatal("Materialize accepts the case")
			}
			if verr := req.Validate(); (verr != nil) != tc.invalidRequest || verr != nil && verr.Error() != want.Error() {
				t.Fatalf("req.Validate() = %v, Materialize = %v", verr, want)
			}
			_, got := h.Runtime.Invoke(context.Background(), req, rc)
			if got == nil {
				t.Fatal("Invoke accepts the case")
			}
			if reflect.TypeOf(got) != reflect.TypeOf(want) || got.Error() != want.Error() {
				t.Fatalf("Invoke: %T %v, want Materialize's %T %v", got, got, want, want)
			}
			var ve *runcontext.ValidationError
			if !errors.As(got, &ve) || !errors.Is(got, runcontext.ErrInvalid) {
				t.Fatalf("Invoke: %v is not a *runcontext.ValidationError matching ErrInvalid", got)
			}
		})
	}
}
