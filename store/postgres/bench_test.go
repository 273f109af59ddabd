package postgres_test

// The store benchmarks: the bodies are internal/storekit's, which
// store/sqlite runs on SQLite too. They need a server
// (CONTEXTOS_POSTGRES_URL; each benchmark gets a fresh schema). The figures and
// commands are in docs/benchmarks.md:
//
//	CONTEXTOS_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test go test -run '^$' -bench . -benchmem ./store/postgres

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/pgtest"
	"github.com/contextos/contextos/internal/storekit"
	"github.com/contextos/contextos/store/postgres"
)

// benchStore opens a fresh schema for a benchmark, or skips it without a
// server.
func benchStore(b *testing.B) *postgres.Store {
	b.Helper()
	return openURL(b, pgtest.URL(b))
}

func openURL(b *testing.B, url string) *postgres.Store {
	b.Helper()
	st, err := postgres.Open(context.Background(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func BenchmarkStore(b *testing.B) {
	storekit.Stores(b, func(b *testing.B) storekit.Engine { return benchStore(b) })
}

func BenchmarkInvokeRefund(b *testing.B) {
	storekit.InvokeRefund(b, func(b *testing.B) storekit.Engine { return benchStore(b) })
}

// Scaling across processes sharing one database: BenchmarkInvokeRefundProcesses
// starts P processes (this test binary re-executed), each invoking the
// 1200 refund one run after another on its own connection pool, and
// times them from a common start to the last one's end; runs/s is the
// throughput of all of them together. Setup (process start, open,
// harness) is outside the timing.
//
//	CONTEXTOS_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test go test -run '^$' -bench InvokeRefundProcesses -benchtime 2000x ./store/postgres
func BenchmarkInvokeRefundProcesses(b *testing.B) {
	if url := os.Getenv(childURLEnv); url != "" {
		refundChild(b, url)
		return
	}
	for _, procs := range []int{1, 2} {
		b.Run("procs="+strconv.Itoa(procs), func(b *testing.B) {
			url := pgtest.URL(b)
			runs := (b.N + procs - 1) / procs
			children := make([]*benchChild, procs)
			for i := range children {
				children[i] = startBenchChild(b, url, fmt.Sprintf("p%d_%d", i, b.N), runs)
			}
			b.ResetTimer()
			start := time.Now()
			for _, c := range children {
				c.goAhead()
			}
			var wg sync.WaitGroup
			errs := make([]error, procs)
			for i, c := range children {
				wg.Go(func() { errs[i] = c.wait() })
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(runs*procs)/elapsed.Seconds(), "runs/s")
		})
	}
}

// The child process's settings, from its parent.
const (
	childURLEnv    = "CONTEXTOS_BENCH_CHILD_URL"
	childPrefixEnv = "CONTEXTOS_BENCH_CHILD_PREFIX"
	childRunsEnv   = "CONTEXTOS_BENCH_CHILD_RUNS"
)

// benchChild is one benchmark process.
type benchChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startBenchChild starts a process that prepares to invoke runs refunds on
// url under run ids with prefix, and waits until it is ready.
func startBenchChild(b *testing.B, url, prefix string, runs int) *benchChild {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkInvokeRefundProcesses$", "-test.benchtime=1x")
	cmd.Env = append(os.Environ(), childURLEnv+"="+url, childPrefixEnv+"="+prefix, childRunsEnv+"="+strconv.Itoa(runs))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &benchChild{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	b.Cleanup(func() {
		_ = c.stdin.Close()
		for c.out.Scan() { // the rest of its output, before Wait closes the pipe
		}
		_ = c.cmd.Wait()
	})
	if err := c.expect("ready"); err != nil {
		b.Fatal(err)
	}
	return c
}

func (c *benchChild) goAhead() { _, _ = io.WriteString(c.stdin, "go\n") }

// wait waits for the child's runs to end.
func (c *benchChild) wait() error { return c.expect("done") }

// expect reads the child's output up to its line "refund-child WORD"; a
// failure line is returned as an error.
func (c *benchChild) expect(word string) error {
	for c.out.Scan() {
		line := c.out.Text()
		if msg, ok := strings.CutPrefix(line, "refund-child failed: "); ok {
			return fmt.Errorf("benchmark process: %s", msg)
		}
		if line == "refund-child "+word {
			return nil
		}
	}
	return fmt.Errorf("benchmark process ended before %q (%v)", word, c.out.Err())
}

// refundChild is the child's side: build the runtime on url, say ready,
// wait for go, invoke the runs, say done.
func refundChild(b *testing.B, url string) {
	fail := func(err error) {
		fmt.Println("refund-child failed:", strings.ReplaceAll(err.Error(), "\n", " "))
		b.Fatal(err)
	}
	runs, err := strconv.Atoi(os.Getenv(childRunsEnv))
	if err != nil {
		fail(err)
	}
	prefix := os.Getenv(childPrefixEnv)
	var opts contextos.Options
	openURL(b, url).Configure(&opts)
	h := storekit.RefundHarness(b, opts)
	req, rc := storekit.Request(b)
	ctx := context.Background()
	fmt.Println("refund-child ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fail(err)
	}
	for i := range runs {
		rc.RunID = "run_" + prefix + "_" + strconv.Itoa(i)
		res, err := h.Runtime.Invoke(ctx, req, rc)
		if err == nil && res.Status != decision.Decided {
			err = fmt.Errorf("run %s is %s", rc.RunID, res.Status)
		}
		if err != nil {
			fail(err)
		}
	}
	fmt.Println("refund-child done")
}

// BenchmarkPendingApprovals is Runtime.PendingApprovals over 1,000 to
// 100,000 stored runs, ten of them paused.
func BenchmarkPendingApprovals(b *testing.B) {
	var url string
	storekit.PendingApprovals(b, storekit.PendingBench{
		Open: func(b *testing.B) (contextos.Options, contextos.CheckpointLister) {
			url = pgtest.URL(b)
			st := openURL(b, url)
			var o contextos.Options
			st.Configure(&o)
			return o, st.Checkpoints()
		},
		Seed: func(b *testing.B, n int, data []byte) {
			db, err := sql.Open("pgx", url)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(storekit.SeedSQL, data, n); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Exec(`ANALYZE contextos_checkpoints`); err != nil {
				b.Fatal(err)
			}
		},
	})
}

// BenchmarkRecordHistory is the decision store's List of one run and
// Verify over 1,000 to 100,000 stored records.
func BenchmarkRecordHistory(b *testing.B) {
	storekit.RecordHistory(b, func(b *testing.B) (decision.Store, *sql.DB) {
		url := pgtest.URL(b)
		st := openURL(b, url)
		db, err := sql.Open("pgx", url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return st.Records(), db
	})
}
