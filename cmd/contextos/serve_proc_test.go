package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/contextos/contextos/internal/fixture"
)

// The tests that run contextos serve as a process: a build of this
// command, started with flags, stopped with SIGTERM when the test ends.

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	// builtDir is removed by TestMain.
	builtDir string
)

// cliBinary builds the contextos command once per test binary.
func cliBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "contextos-bin-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(builtDir, "contextos")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatalf("build contextos: %v", buildErr)
	}
	return builtBin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// serveProc is a running contextos serve.
type serveProc struct {
	url  string
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
	code int
}

func (p *serveProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// startServeProc starts contextos serve with args (and --addr 127.0.0.1:0)
// and waits until it listens; it is stopped with SIGTERM when t ends,
// and must then exit 0.
func startServeProc(t *testing.T, args ...string) *serveProc {
	t.Helper()
	bin := cliBinary(t)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if _, rest, ok := strings.Cut(line, "listening on "); ok {
				ready <- strings.Fields(rest)[0]
			}
		}
		cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.code != 0 {
				t.Errorf("contextos serve exited %d after SIGTERM:\n%s", p.code, p.log())
			}
		case <-time.After(45 * time.Second):
			cmd.Process.Kill()
			<-p.done
			t.Errorf("contextos serve did not stop within 45 s of SIGTERM:\n%s", p.log())
		}
	})
	select {
	case u := <-ready:
		p.url = u
	case <-p.done:
		t.Fatalf("contextos serve exited %d before listening:\n%s", p.code, p.log())
	case <-time.After(2 * time.Minute):
		t.Fatalf("contextos serve did not listen within 2 minutes:\n%s", p.log())
	}
	return p
}

// hsToken signs an HS256 token for sub in tenant with roles, valid for an
// hour.
func hsToken(t *testing.T, key []byte, sub, tenant string, roles ...string) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(map[string]any{"sub": sub, "tenant_id": tenant, "roles": roles, "exp": time.Now().Add(time.Hour).Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveFiles writes what a refund service needs into dir: the HS256
// secret, the plan (the refund's arguments hold a card number) and the
// tools file; it returns the secret and serve's flags for them.
func serveFiles(t *testing.T, dir string) ([]byte, []string) {
	t.Helper()
	key := []byte("e2e-secret-e2e-secret-e2e-secret-e2e-secret")
	keyFile := writeFile(t, dir, "hs256.key", append(key, '\n'))
	plan := writeFile(t, dir, "plan.json", []byte(cardPlan))
	return key, []string{"--pack", testFile(fixture.PackFile), "--allow-unsigned", "--plan", plan, "--tools", testFile("tools.refund.json"),
		"--evidence", testFile(fixture.EvidenceFile), "--ontology", "ont.support@1.0.0", "--now", "2026-05-04T09:31:00Z", "--auth-hs256", keyFile}
}

// refundRunBody is POST /v1/runs's body: the fixture's request (under
// requestID, refunding 4200) and run context without its run id.
func refundRunBody(t *testing.T, requestID string) []byte {
	t.Helper()
	var req, rc map[string]any
	if err := json.Unmarshal(fixture.Invoke(), &req); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fixture.RunContext(), &rc); err != nil {
		t.Fatal(err)
	}
	req["request_id"] = requestID
	c := req["input"].(map[string]any)["context"].(map[string]any)
	c["refund_amount"], c["identity_verified"] = 4200, true
	delete(rc, "run_id")
	b, err := json.Marshal(map[string]any{"request": req, "run_context": rc})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// call makes an API request to a service and decodes its JSON answer.
func call(t *testing.T, method, url, token string, body []byte) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

// waitStatus polls the run through url until it has ended.
func waitEnded(t *testing.T, url, token, runID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, m := call(t, "GET", url+"/v1/runs/"+runID, token, nil)
		if code == http.StatusOK && m["state"] == "ended" {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s has not ended: %d %v", runID, code, m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
