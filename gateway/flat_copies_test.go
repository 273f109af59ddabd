package gateway_test

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/jsonv"
)

// keepingSink keeps the entries it is handed as they are (no copy), so a
// test sees what the gateway handed it and can edit that.
type keepingSink struct {
	mu sync.Mutex
	es []gateway.TranscriptEntry
}

func (s *keepingSink) Append(_ context.Context, e gateway.TranscriptEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.es = append(s.es, e)
	return nil
}

// keepingAdapter returns its output map itself and keeps the call it was
// given, so a test can edit both after the call.
type keepingAdapter struct {
	out  map[string]any
	call *gateway.Call
}

func (a *keepingAdapter) Call(_ context.Context, c *gateway.Call) (*gateway.Outcome, error) {
	a.call = c
	return &gateway.Outcome{Output: a.out}, nil
}

// scribbleAll writes mark over every member of v at every depth (and adds
// one), as a hostile party would.
func scribbleAll(v any, mark string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				scribbleAll(e, mark)
			default:
				x[k] = mark
			}
		}
		x[mark] = mark
	case []any:
		for i, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				scribbleAll(e, mark)
			default:
				x[i] = mark
			}
		}
	}
}

// The copies a call makes of its arguments, its metadata and its output
// (the record's and the sink's, the adapter's, the result's) share
// nothing, whether the values are flat (only scalars: the gateway copies
// the map itself, knowing it) or nested (deep copies): each party's edits,
// at any depth, reach no other party.
func TestCopiesOfFlatAndNestedValuesShareNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		args, out map[string]any
	}{
		{"flat", map[string]any{"order_id": "ord_881", "limit": 3.0}, map[string]any{"ok": true, "status": "delivered"}},
		{"nested", map[string]any{"order_id": "ord_881", "filter": map[string]any{"state": "open"}, "ids": []any{"a", map[string]any{"b": "c"}}},
			map[string]any{"order": map[string]any{"status": "delivered"}, "lines": []any{"l1", map[string]any{"sku": "k1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			sink := &keepingSink{}
			opts := f.opts
			opts.Transcript = sink
			ad := &keepingAdapter{out: tc.out}
			run := ordersRun(t, f, ad, gateway.Capability{HonorsContext: true}, &opts)
			wantArgs, wantOut := jsonv.CloneObject(tc.args), jsonv.CloneObject(tc.out)
			req := gateway.CallRequest{CapabilityID: "adp_orders.lookup", Step: gateway.StepID{Index: 1}, Args: tc.args}
			res, err := run.Call(ctx, req)
			if err != nil || res.Status != gateway.StatusOK {
				t.Fatalf("%v %+v", err, res)
			}
			if len(sink.es) != 2 || sink.es[0].Call == nil || sink.es[1].Result == nil {
				t.Fatalf("the sink holds %d entries, want a call and a result", len(sink.es))
			}
			call, result := sink.es[0].Call, sink.es[1].Result
			if !reflect.DeepEqual(call.Args, wantArgs) || !reflect.DeepEqual(result.Output, wantOut) || !reflect.DeepEqual(ad.call.Envelope.Args, wantArgs) {
				t.Fatalf("the copies differ before any edit: %v %v %v", call.Args, result.Output, ad.call.Envelope.Args)
			}
			wantMeta := jsonv.CloneObject(call.Metadata)

			// The sink edits what it stores: the result, the adapter's
			// envelope and the caller's values are unchanged.
			scribbleAll(call.Args, "sink")
			scribbleAll(call.Metadata, "sink")
			scribbleAll(result.Output, "sink")
			if !reflect.DeepEqual(res.Output, wantOut) {
				t.Errorf("the sink's edit reached the result: %v", res.Output)
			}
			if !reflect.DeepEqual(ad.call.Envelope.Args, wantArgs) || !reflect.DeepEqual(ad.call.Envelope.Metadata, wantMeta) {
				t.Errorf("the sink's edit reached the adapter's envelope: %v %v", ad.call.Envelope.Args, ad.call.Envelope.Metadata)
			}
			if !reflect.DeepEqual(tc.args, wantArgs) || !reflect.DeepEqual(tc.out, wantOut) {
				t.Errorf("the sink's edit reached the caller's args or the adapter's output: %v %v", tc.args, tc.out)
			}

			// The caller and the adapter edit what they hold: the sink's
			// entries (as the sink left them) are unchanged.
			sinkArgs, sinkMeta, sinkOut := jsonv.CloneObject(call.Args), jsonv.CloneObject(call.Metadata), jsonv.CloneObject(result.Output)
			scribbleAll(req.Args, "caller")
			scribbleAll(res.Output, "caller")
			scribbleAll(ad.call.Envelope.Args, "adapter")
			scribbleAll(ad.call.Envelope.Metadata, "adapter")
			scribbleAll(ad.out, "adapter")
			if !reflect.DeepEqual(call.Args, sinkArgs) || !reflect.DeepEqual(call.Metadata, sinkMeta) || !reflect.DeepEqual(result.Output, sinkOut) {
				t.Errorf("the caller's or the adapter's edit reached the sink's entries: %v %v %v", call.Args, call.Metadata, result.Output)
			}

			// A second call sees none of the edits: the run's own values
			// (the capability's metadata) are the run's.
			ad.out = jsonv.CloneObject(wantOut)
			res2, err := run.Call(ctx, gateway.CallRequest{CapabilityID: "adp_orders.lookup", Step: gateway.StepID{Index: 2}, Args: jsonv.CloneObject(wantArgs)})
			if err != nil || res2.Status != gateway.StatusOK {
				t.Fatalf("%v %+v", err, res2)
			}
			if !reflect.DeepEqual(sink.es[2].Call.Metadata, wantMeta) || !reflect.DeepEqual(ad.call.Envelope.Metadata, wantMeta) {
				t.Errorf("an edit reached the next call's metadata: %v %v", sink.es[2].Call.Metadata, ad.call.Envelope.Metadata)
			}
		})
	}
}
