// Package temporaltest runs a real Temporal server for tests: the binary
// CONTEXTOS_TEMPORAL_SERVER names (.ci/temporal-server builds it from the
// tools/temporal-server module and prints its path), started with SQLite
// in memory and no auth on free loopback ports, so test packages running
// at once never share a server, with the namespace "default" registered
// and serving workflows before a test gets its address. The server runs
// in a process group of its own, killed when the test (Start) or the test
// binary (Shared, with Main) ends and, on Linux, when the test process
// dies however it dies.
//
// Without CONTEXTOS_TEMPORAL_SERVER a test is skipped with a message
// naming it, unless CI is set: CI never skips a Temporal test, so there
// the test fails. It is test support: only tests import it.
package temporaltest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"
)

// EnvServer is the environment variable naming the server binary.
const EnvServer = "CONTEXTOS_TEMPORAL_SERVER"

// envCI is set in CI, where a Temporal test must run, never skip.
const envCI = "CI"

// Namespace is the namespace a server has registered when a test gets it.
const Namespace = "default"

// startTimeout bounds a server's start: the process up, the frontend
// answering, the namespace registered and a workflow run in it. A cold
// start takes seconds; the bound leaves room for a loaded CI machine.
const startTimeout = 3 * time.Minute

// errNoServer reports that no server binary is configured and the test
// is not in CI: the test is skipped.
var errNoServer = errors.New("temporaltest: no Temporal server configured")

// Server is a running Temporal server.
type Server struct {
	// HostPort is the frontend's gRPC address, host:port.
	HostPort string
	// Namespace is the registered namespace, Namespace.
	Namespace string

	proc *process
	dir  string
}

// Start starts a server for t and stops it when t ends. It skips t when
// no server is configured outside CI, and fails t when none is
// configured in CI or the server does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	began := time.Now()
	s, err := start(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("temporaltest: a server on %s served namespace %s after %v", s.HostPort, s.Namespace, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("temporaltest: the server's log ends:\n%s", s.logTail())
		}
		if err := s.stop(); err != nil {
			t.Errorf("temporaltest: stop: %v", err)
		}
	})
	return s
}

// The server Shared starts, once per test binary; Main stops it.
var shared struct {
	sync.Mutex
	main bool // Main runs the tests
	s    *Server
	err  error
}

// Shared returns the test binary's one server, starting it on first use;
// tests sharing it keep to task queues and workflow ids of their own.
// The package's TestMain must call Main, which stops it. Like Start it
// skips or fails t when no server is configured.
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	shared.Lock()
	defer shared.Unlock()
	if !shared.main {
		t.Fatal("temporaltest: Shared needs the package's TestMain to call temporaltest.Main (it stops the server)")
	}
	if shared.s == nil && shared.err == nil {
		began := time.Now()
		shared.s, shared.err = start(bin)
		if shared.err == nil {
			t.Logf("temporaltest: the shared server on %s served namespace %s after %v", shared.s.HostPort, shared.s.Namespace, time.Since(began).Round(time.Millisecond))
		}
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.s
}

// Main runs the package's tests, stops the server Shared started, checks
// no test left a goroutine behind (goleak) and exits: call it from
// TestMain.
func Main(m *testing.M) {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	if s := shared.s; s != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "temporaltest: the shared server's log ends:\n%s\n", s.logTail())
		}
		if err := s.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "temporaltest: stop: %v\n", err)
			code = 1
		}
		shared.s = nil
	}
	shared.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// ClientOptions returns options for a client of s in its namespace; the
// client logs warnings and errors to stderr.
func (s *Server) ClientOptions() client.Options {
	return client.Options{HostPort: s.HostPort, Namespace: s.Namespace, Logger: Logger()}
}

// Dial returns a client of s, closed when t ends.
func (s *Server) Dial(t testing.TB) client.Client {
	t.Helper()
	c, err := client.Dial(s.ClientOptions())
	if err != nil {
		t.Fatalf("temporaltest: dial %s: %v", s.HostPort, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Logger is the SDK logger of test clients and workers: warnings and
// errors to stderr, which go test shows when a test fails.
func Logger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// binary returns the configured server binary, skipping t when there is
// none outside CI and failing it when there is none in CI or the
// variable names no executable file.
func binary(t testing.TB) string {
	t.Helper()
	bin, err := lookBinary(os.Getenv)
	if errors.Is(err, errNoServer) {
		t.Skipf("Temporal tests skipped: set %s to a Temporal server binary to run them (export %s=$(.ci/temporal-server) builds it once)", EnvServer, EnvServer)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// lookBinary returns the server binary getenv configures: errNoServer
// when none is configured outside CI, another error when none is
// configured in CI or the one configured is not an executable file.
func lookBinary(getenv func(string) string) (string, error) {
	bin := getenv(EnvServer)
	if bin == "" {
		if getenv(envCI) != "" {
			return "", fmt.Errorf("temporaltest: %s is not set, and CI is: CI runs every Temporal test (.ci/run sets it from .ci/temporal-server)", EnvServer)
		}
		return "", errNoServer
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("temporaltest: %s: %w", EnvServer, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("temporaltest: %s: %s is not an executable file", EnvServer, bin)
	}
	return bin, nil
}

// start starts the server bin on free ports and waits until it serves
// workflows in Namespace. Ports are picked free and released before the
// server binds them, so another process can take one in between: a
// server that exits for a port in use is started again on other ports.
func start(bin string) (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		s, err := launch(bin)
		if err != nil {
			return nil, err
		}
		err = s.ready(ctx)
		if err == nil {
			return s, nil
		}
		tail := s.logTail()
		stopErr := s.stop()
		if errors.Is(err, errExited) && portInUse(tail) && attempt < 3 {
			continue
		}
		return nil, fmt.Errorf("temporaltest: the server at %s did not start: %w (stop: %v); its log ends:\n%s", s.HostPort, err, stopErr, tail)
	}
}

// launch writes the server's configuration to a new directory and starts
// the server process.
func launch(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "contextos-temporal-")
	if err != nil {
		return nil, fmt.Errorf("temporaltest: %w", err)
	}
	cfg, err := writeConfig(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p, err := startProcess(bin, dir, cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Server{HostPort: cfg.frontendHostPort(), Namespace: Namespace, proc: p, dir: dir}, nil
}

// errExited reports that the server process exited while starting.
var errExited = errors.New("the server process exited")

// ready waits until the frontend answers, registers Namespace, and waits
// until a workflow runs in it: the frontend serves a new namespace only
// once its namespace cache has refreshed, so a probe workflow is started
// until one completes (a poll; the refresh interval is a second).
func (s *Server) ready(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() {
		select {
		case <-s.proc.exited:
			stop(errExited)
		case <-ctx.Done():
		}
	}()
	if err := s.register(ctx); err != nil {
		return err
	}
	return s.probe(ctx)
}

// register registers Namespace, retrying until the frontend answers.
func (s *Server) register(ctx context.Context) error {
	nc, err := client.NewNamespaceClient(client.Options{HostPort: s.HostPort, Logger: Logger()})
	if err != nil {
		return err
	}
	defer nc.Close()
	req := &workflowservice.RegisterNamespaceRequest{Namespace: s.Namespace, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)}
	return poll(ctx, "register the namespace", func(ctx context.Context) error {
		err := nc.Register(ctx, req)
		if _, ok := errors.AsType[*serviceerror.NamespaceAlreadyExists](err); ok {
			return nil // an earlier attempt registered it, its reply lost
		}
		return err
	})
}

// probeWorkflow is the workflow the readiness probe runs.
func probeWorkflow(workflow.Context) error { return nil }

// probe runs a workflow in Namespace on a worker of its own until one
// completes.
func (s *Server) probe(ctx context.Context) error {
	c, err := client.DialContext(ctx, s.ClientOptions())
	if err != nil {
		return fmt.Errorf("dial: %w", context.Cause(ctx))
	}
	defer c.Close()
	const queue, name = "temporaltest-probe", "temporaltest.probe"
	var w worker.Worker
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	n := 0
	return poll(ctx, "run a workflow in the namespace", func(ctx context.Context) error {
		if w == nil {
			nw := worker.New(c, queue, worker.Options{})
			nw.RegisterWorkflowWithOptions(probeWorkflow, workflow.RegisterOptions{Name: name})
			if err := nw.Start(); err != nil {
				return err
			}
			w = nw
		}
		n++
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("temporaltest-probe-%d", n), TaskQueue: queue}, name)
		if err != nil {
			return err
		}
		return run.Get(ctx, nil)
	})
}

// poll calls try, each call bounded to a few seconds, until it succeeds
// or ctx ends.
func poll(ctx context.Context, what string, try func(context.Context) error) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := try(tctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, context.Cause(ctx), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop kills the server's process group, waits for the process and
// removes its directory.
func (s *Server) stop() error {
	s.proc.kill()
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// logTail is the end of the server's log.
func (s *Server) logTail() string { return s.proc.logTail() }
