package main

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// otlpToken is a collector's bearer token, written with ": " where the
// OTEL_EXPORTER_OTLP_HEADERS format wants "=" (a common slip).
const otlpToken = "otlp-collector-token-7c1f9e"

// A malformed OTEL_EXPORTER_OTLP_HEADERS keeps its value, a collector's
// bearer token, out of serve's log: serve refuses it by the variable's
// name (the exporters would log it whole, drop the header and export
// unauthenticated).
func TestServeKeepsOTLPHeadersOutOfItsLog(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer "+otlpToken)
	t.Setenv("OTEL_SDK_DISABLED", "")
	dir := t.TempDir()
	_, flags := serveFiles(t, dir)
	flags = append(flags, "--store", "sqlite:"+filepath.Join(dir, "contextos.db"))
	cmd := exec.Command(cliBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0"}, flags...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "listening on ") {
				cmd.Process.Signal(syscall.SIGTERM)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
	}
	cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(log.String(), otlpToken) {
		t.Errorf("serve's log holds the OTLP header's token:\n%s", log.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(log.String(), "OTEL_EXPORTER_OTLP_HEADERS") {
		t.Errorf("serve exited %d with a malformed OTEL_EXPORTER_OTLP_HEADERS, want %d naming it:\n%s", code, exitUsage, log.String())
	}
}

// A per-signal endpoint turns that signal's export on, not the other's
// (which would go to the default http://localhost:4318, whatever listens
// there); OTEL_{TRACES,METRICS}_EXPORTER=none turns one off.
func TestTelemetryPerSignal(t *testing.T) {
	cases := []struct {
		name            string
		env             map[string]string
		traces, metrics bool
	}{
		{"traces endpoint only", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, true, false},
		{"metrics endpoint only", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:1/v1/metrics"}, false, true},
		{"metrics exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_METRICS_EXPORTER": "none"}, true, false},
		{"traces exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tel, err := newTelemetry(context.Background(), func(k string) string { return c.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			defer tel.shutdown(ctx)
			if got := tel.tracerProvider() != nil; got != c.traces {
				t.Errorf("traces exported: %v, want %v", got, c.traces)
			}
			if got := tel.meterProvider() != nil; got != c.metrics {
				t.Errorf("metrics exported: %v, want %v", got, c.metrics)
			}
		})
	}
}
