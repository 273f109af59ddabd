package grpctransport_test

import (
	"errors"
	"testing"

	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
)

// The gRPC adapter sends the endpoint's wire tool name for a capability
// (the capability id by default); refused names are refused here too.
func TestWireToolNameOverGRPC(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	url := serveTools(t, rec)
	for _, want := range []string{"adp_payments.issue_refund", "refund"} {
		ep := transport.Endpoint{Transport: "grpc", URL: url, AllowPrivate: true}
		if want == "refund" {
			ep.Tools = map[string]transport.ToolInfo{"issue_refund": {Name: "refund"}}
		}
		a, err := grpctransport.New(ep, &grpctransport.Options{Plaintext: true})
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.Call(bg, call(1, nil))
		a.Close()
		if err != nil || out.Mutations[0] != "adp_payments.issue_refund:ik_1" {
			t.Fatalf("%v %v", out, err)
		}
		rec.mu.Lock()
		got := rec.reqs[len(rec.reqs)-1].Tool.Name
		rec.mu.Unlock()
		if got != want {
			t.Errorf("tool.name %q, want %q", got, want)
		}
	}
	_, err := grpctransport.New(transport.Endpoint{Transport: "grpc", URL: url, AllowPrivate: true,
		Tools: map[string]transport.ToolInfo{"a": {Name: "x"}, "b": {Name: "x"}}}, &grpctransport.Options{Plaintext: true})
	var ce *transport.ConfigError
	if !errors.As(err, &ce) || ce.Field != "tools.b.name" {
		t.Errorf("a shared name: %v", err)
	}
}
