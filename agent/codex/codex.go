package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/internal/cliproc"
)

// Config configures a Backend. The zero value runs "codex" from PATH with
// the CLI's own defaults.
type Config struct {
	// Binary is the codex executable; "" means $CODEX_BINARY, else "codex"
	// looked up in PATH.
	Binary string
	// Home is CODEX_HOME for the CLI ("" leaves it to the environment).
	Home string
	// Model is the default model, overridden by agent_api.config.model.v1
	// ("" leaves the choice to the CLI).
	Model string
	// DefaultTimeout bounds a run whose request has no timeout (0: none).
	DefaultTimeout time.Duration
	// DefaultWorkingDir is used when the request has none ("" inherits
	// this process's).
	DefaultWorkingDir string
	// Env is laid over this process's environment for the CLI; the
	// request's env is laid over it.
	Env map[string]string
	// AllowExternalSandboxExec advertises the dangerous
	// agent_api.exec.external_sandbox.v1: the CLI then runs with
	// --dangerously-bypass-approvals-and-sandbox, relying on a sandbox
	// around it.
	AllowExternalSandboxExec bool
}

// The backend-specific capability ids and extension keys.
const (
	keyApprovalPolicy = "backend.codex.exec.approval_policy"
	keySandboxMode    = "backend.codex.exec.sandbox_mode"
	capExecStream     = "backend.codex.exec_stream"
)

// dangerousStatus is the status event a run with external sandbox exec
// starts with.
const dangerousStatus = "DANGEROUS: external sandbox exec policy enabled (agent_api.exec.external_sandbox.v1=true)"

// Backend runs the Codex CLI. It is safe for concurrent use.
type Backend struct {
	cfg  Config
	caps agent.Capabilities

	mu      sync.Mutex
	addDirs map[string]bool // binaries whose --help lists --add-dir
}

// New returns a Backend for cfg (copied).
func New(cfg Config) *Backend {
	cfg.Env = maps.Clone(cfg.Env)
	caps := agent.NewCapabilities(
		agent.CapRun, agent.CapEvents, agent.CapEventsLive, agent.CapCancel,
		agent.CapToolsStructured, agent.CapToolResults, agent.CapFinalText,
		agent.CapSessionHandle, agent.CapSessionResume, agent.CapModel,
		agent.CapAddDirs, agent.CapNonInteractive,
		keyApprovalPolicy, keySandboxMode, capExecStream,
	)
	if cfg.AllowExternalSandboxExec {
		caps = caps.With(agent.CapExternalSandbox)
	}
	return &Backend{cfg: cfg, caps: caps, addDirs: map[string]bool{}}
}

// Kind is agent.KindCodex.
func (b *Backend) Kind() agent.Kind { return agent.KindCodex }

// Capabilities lists what the backend implements.
func (b *Backend) Capabilities() agent.Capabilities { return b.caps }

// Run validates req and starts the CLI; see the package doc.
func (b *Backend) Run(ctx context.Context, req agent.RunRequest) (*agent.Run, error) {
	p, err := agent.Prepare(agent.KindCodex, b.caps, req, agent.Defaults{
		WorkingDir:   b.cfg.DefaultWorkingDir,
		Timeout:      b.cfg.DefaultTimeout,
		Env:          b.cfg.Env,
		Keys:         []string{keyApprovalPolicy, keySandboxMode},
		CheckValue:   checkValue,
		CheckRequest: checkRequest,
	})
	if err != nil {
		return nil, err
	}
	inv := invocationFor(p, strings.TrimSpace(b.cfg.Model))
	return agent.Start(ctx, agent.RunConfig{
		Kind:         agent.KindCodex,
		Capabilities: b.caps,
		Timeout:      p.Timeout,
	}, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		return b.drive(ctx, out, p, inv)
	}), nil
}

var (
	approvalPolicies = []string{"untrusted", "on-failure", "on-request", "never"}
	sandboxModes     = []string{"read-only", "workspace-write", "danger-full-access"}
)

// checkValue validates the backend's own extension keys.
func checkValue(key string, raw json.RawMessage) error {
	var allowed []string
	switch key {
	case keyApprovalPolicy:
		allowed = approvalPolicies
	case keySandboxMode:
		allowed = sandboxModes
	default: // Prepare passes only Keys
		return agent.InvalidRequest("invalid " + key)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || !contains(allowed, s) {
		return agent.InvalidRequest("invalid " + key)
	}
	return nil
}

// checkRequest refuses an approval policy that could prompt in a
// non-interactive run.
func checkRequest(p *agent.Prepared) error {
	if pol := stringExt(p, keyApprovalPolicy); p.NonInteractive && pol != "" && pol != "never" {
		return agent.InvalidRequest(keyApprovalPolicy + " must be never when " + agent.CapNonInteractive + " is true")
	}
	return nil
}

// stringExt returns a validated string extension ("" when absent).
func stringExt(p *agent.Prepared, key string) string {
	var s string
	if raw, ok := p.Extensions[key]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// invocation is what the argv is built from.
type invocation struct {
	Model string
	// Approval is the --ask-for-approval value ("" omits the flag).
	Approval string
	Sandbox  string
	// External replaces approval and sandbox with the bypass flag.
	External    bool
	AddDirs     []string
	LastMessage string
	Resume      *agent.SessionSelector
}

func invocationFor(p *agent.Prepared, defaultModel string) invocation {
	inv := invocation{
		Model:    p.Model,
		Sandbox:  stringExt(p, keySandboxMode),
		External: p.ExternalSandbox,
		AddDirs:  p.AddDirs,
		Resume:   p.Resume,
	}
	if inv.Model == "" {
		inv.Model = defaultModel
	}
	if inv.Sandbox == "" {
		inv.Sandbox = "workspace-write"
	}
	if p.NonInteractive {
		inv.Approval = "never"
	} else {
		inv.Approval = stringExt(p, keyApprovalPolicy)
	}
	return inv
}

// args builds the CLI's argv (after the binary).
func (inv invocation) args() []string {
	var a []string
	if strings.HasPrefix(inv.Model, "gpt-5") {
		a = append(a,
			"--config", "model_reasoning_effort=medium",
			"--config", "model_reasoning_summary=auto",
			"--config", "model_verbosity=low")
	}
	if inv.External {
		a = append(a, "--dangerously-bypass-approvals-and-sandbox")
	} else {
		if inv.Approval != "" {
			a = append(a, "--ask-for-approval", inv.Approval)
		}
		a = append(a, "--sandbox", inv.Sandbox)
	}
	a = append(a, "exec", "--color", "never", "--skip-git-repo-check", "--json")
	if inv.Model != "" {
		a = append(a, "--model", inv.Model)
	}
	for _, d := range inv.AddDirs {
		a = append(a, "--add-dir", d)
	}
	a = append(a, "--output-last-message", inv.LastMessage)
	switch {
	case inv.Resume != nil && inv.Resume.Last:
		a = append(a, "resume", "--last", "-")
	case inv.Resume != nil:
		a = append(a, "resume", inv.Resume.ID, "-")
	}
	return a
}

// binary is the executable to run.
func (b *Backend) binary() string {
	if b.cfg.Binary != "" {
		return b.cfg.Binary
	}
	if env := os.Getenv("CODEX_BINARY"); env != "" {
		return env
	}
	return "codex"
}

// env is the overlay for the CLI's environment.
func (b *Backend) env(bin string, p *agent.Prepared) map[string]string {
	env := map[string]string{"CODEX_BINARY": bin}
	if b.cfg.Home != "" {
		env["CODEX_HOME"] = b.cfg.Home
	}
	if _, ok := os.LookupEnv("RUST_LOG"); !ok {
		env["RUST_LOG"] = "error"
	}
	maps.Copy(env, p.Env)
	return env
}

// The backend's failure messages.
const (
	msgSpawn          = "codex could not be started"
	msgTempDir        = "codex output file could not be created"
	msgAddDirs        = "add_dirs rejected by runtime"
	msgTimeout        = "timeout"
	msgCancelled      = "cancelled"
	msgNoSession      = "no session found"
	msgSessionMissing = "session not found"
)

func (b *Backend) drive(ctx context.Context, out *agent.Emitter, p *agent.Prepared, inv invocation) (agent.Completion, error) {
	if p.ExternalSandbox {
		out.Emit(agent.Event{Kind: agent.EventStatus, Channel: "status", Message: dangerousStatus})
	}
	bin := b.binary()
	env := b.env(bin, p)
	if len(inv.AddDirs) > 0 {
		if err := b.probeAddDirs(ctx, bin, p.WorkingDir, env); err != nil {
			return agent.Completion{}, err
		}
	}
	tmp, err := os.MkdirTemp("", "contextos-codex-")
	if err != nil {
		return agent.Completion{}, agent.BackendError(msgTempDir, err)
	}
	defer os.RemoveAll(tmp)
	inv.LastMessage = filepath.Join(tmp, "last_message.txt")

	m := newMapper(inv.Resume != nil)
	res, err := cliproc.Run(ctx, cliproc.Cmd{
		Path:  bin,
		Args:  inv.args(),
		Dir:   p.WorkingDir,
		Env:   env,
		Stdin: []byte(p.Prompt + "\n"),
	}, func(l cliproc.Line) {
		var evs []agent.Event
		if l.TooLong > 0 {
			evs = m.tooLong(l.TooLong)
		} else {
			evs = m.line(l.Bytes)
		}
		for _, ev := range evs {
			out.Emit(ev)
		}
	})
	if ctxErr := contextFailure(ctx); ctxErr != nil {
		return agent.Completion{}, ctxErr
	}
	if err != nil {
		return agent.Completion{}, agent.BackendError(msgSpawn, err)
	}
	comp := agent.Completion{Status: res.Status, Data: m.completionData()}
	if res.Status.Success() {
		comp.FinalText = readFinalText(inv.LastMessage)
		return comp, nil
	}
	if inv.Resume != nil && m.resumeNotFound(res.Stderr) {
		if inv.Resume.Last {
			return agent.Completion{}, agent.BackendError(msgNoSession)
		}
		return agent.Completion{}, agent.BackendError(msgSessionMissing)
	}
	out.Emit(agent.Event{
		Kind:    agent.EventError,
		Channel: "error",
		Message: "codex exited non-zero: " + res.Status.String() + " (stderr redacted)",
	})
	return comp, nil
}

// contextFailure is the run's error once ctx is done: "timeout" when its
// cause is a deadline, else "cancelled" (Start reports the cancellation
// itself; the value only keeps the cause).
func contextFailure(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, context.DeadlineExceeded) {
		return agent.BackendError(msgTimeout, cause)
	}
	return agent.BackendError(msgCancelled, cause, agent.ErrCancelled)
}

// readFinalText reads the --output-last-message file, untrimmed, reading
// no more than the bound allows ("" when it is missing).
func readFinalText(path string) string {
	// The CLI controls the file: only a regular file is read (a FIFO or a
	// device put there would block the run forever), and a symlink is not
	// followed.
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscallNoFollow|syscallNonBlock, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, agent.MaxFinalTextBytes+1))
	if err != nil {
		return ""
	}
	return string(b)
}

// probeAddDirs checks that the CLI supports --add-dir: `codex --help`
// must exit 0 and list the flag.
func (b *Backend) probeAddDirs(ctx context.Context, bin, dir string, env map[string]string) error {
	b.mu.Lock()
	ok := b.addDirs[bin]
	b.mu.Unlock()
	if ok {
		return nil
	}
	found := false
	res, err := cliproc.Run(ctx, cliproc.Cmd{Path: bin, Args: []string{"--help"}, Dir: dir, Env: env}, func(l cliproc.Line) {
		if bytes.Contains(l.Bytes, []byte("--add-dir")) {
			found = true
		}
	})
	if ctxErr := contextFailure(ctx); ctxErr != nil {
		return ctxErr
	}
	if err != nil {
		return agent.BackendError(msgSpawn, err)
	}
	if !res.Status.Success() || !found {
		return agent.BackendError(msgAddDirs)
	}
	b.mu.Lock()
	b.addDirs[bin] = true
	b.mu.Unlock()
	return nil
}
