package contextos_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
)

// A pack ref the registry does not hold is the caller's text: the run's
// span names no ref a secret detector finds a key in, as the refusal
// does not.
func TestRunSpanNamesNoSecretPackRef(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	spans := tracetest.NewInMemoryExporter()
	h := contextostest.New(t, contextostest.NewPlanner(lookupPlan(), refundPlan(4200)), [][]byte{readTestdata(t, "ctxpack.support-1.0.0.json")}, &contextostest.Options{
		Runtime: contextos.Options{Evidence: evidence(t), TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))},
	})
	scriptDefaults(h, "")
	req, rc := refundRequest(t, 4200, true)
	req.ContextPackRefs = append(req.ContextPackRefs, key+"@1.0.0")
	_, err := h.Runtime.Invoke(context.Background(), req, rc)
	if err == nil {
		t.Fatal("Invoke with a pack the registry does not hold succeeded")
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("the refusal names the key: %v", err)
	}
	var b []byte
	for _, s := range spans.GetSpans() {
		b = fmt.Appendf(b, "%s %v %v\n", s.Name, s.Attributes, s.Events)
	}
	if len(spans.GetSpans()) == 0 {
		t.Fatalf("no spans: %v", err)
	}
	if strings.Contains(string(b), key) {
		t.Errorf("a span names the key: %s", b)
	}
}
