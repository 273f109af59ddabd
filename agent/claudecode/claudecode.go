package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/internal/cliproc"
)

// CapPrintStreamJSON is this backend's own capability: it drives
// `claude --print --output-format stream-json`.
const CapPrintStreamJSON = "backend.claude_code.print_stream_json"

// Config configures the backend. The zero value runs "claude" from PATH
// (or $CLAUDE_BINARY) with the CLI's own defaults.
type Config struct {
	// Binary is the claude executable; "" means $CLAUDE_BINARY (read by
	// New), else "claude" on PATH.
	Binary string
	// Home isolates the user home of the child (claude_home): when set,
	// the child gets CLAUDE_HOME and HOME = Home, and XDG_CONFIG_HOME,
	// XDG_DATA_HOME, XDG_CACHE_HOME under it. A relative Home is resolved
	// against this process's working directory when a run starts. It does
	// not isolate a project's own .claude/ or .mcp.json.
	Home string
	// Model is the default model id (passed as --model); a request's
	// agent_api.config.model.v1 wins. "" keeps the CLI's default.
	Model string
	// DefaultTimeout bounds a run whose request has no timeout (0: none).
	DefaultTimeout time.Duration
	// DefaultWorkingDir is the run's directory when the request names
	// none ("" inherits this process's).
	DefaultWorkingDir string
	// Env is laid over this process's environment for the child; the
	// request's env is laid over it.
	Env map[string]string
	// AllowExternalSandboxExec advertises
	// agent_api.exec.external_sandbox.v1: a request may then run claude
	// with --dangerously-skip-permissions, for a host that sandboxes the
	// process itself. Dangerous; default false.
	AllowExternalSandboxExec bool
}

// Backend runs Claude Code behind the universal contract. It is safe for
// concurrent use; each Run spawns its own process.
type Backend struct {
	cfg    Config
	binary string
	model  string
	caps   agent.Capabilities
}

// New returns a backend for cfg (copied).
func New(cfg Config) *Backend {
	cfg.Env = cloneEnv(cfg.Env)
	b := &Backend{cfg: cfg, binary: cfg.Binary, model: strings.TrimSpace(cfg.Model)}
	if b.binary == "" {
		b.binary = os.Getenv("CLAUDE_BINARY")
	}
	if b.binary == "" {
		b.binary = "claude"
	}
	b.caps = agent.NewCapabilities(
		agent.CapRun, agent.CapEvents, agent.CapEventsLive, agent.CapCancel,
		agent.CapToolsStructured, agent.CapToolResults, agent.CapFinalText,
		agent.CapSessionHandle, agent.CapSessionResume, agent.CapSessionFork,
		agent.CapModel, agent.CapAddDirs, agent.CapNonInteractive, CapPrintStreamJSON,
	)
	if cfg.AllowExternalSandboxExec {
		b.caps = b.caps.With(agent.CapExternalSandbox)
	}
	return b
}

// Kind is agent.KindClaudeCode.
func (b *Backend) Kind() agent.Kind { return agent.KindClaudeCode }

// Capabilities lists what the backend implements.
func (b *Backend) Capabilities() agent.Capabilities { return b.caps }

// msgExternalSandbox is the one Status of a run with the external sandbox
// policy, before any other event.
const msgExternalSandbox = "DANGEROUS: external sandbox exec policy enabled (agent_api.exec.external_sandbox.v1=true)"

// Run validates req before anything is spawned (agent.Prepare with the
// config's defaults), then starts claude and returns the run's handle at
// once.
func (b *Backend) Run(ctx context.Context, req agent.RunRequest) (*agent.Run, error) {
	p, err := agent.Prepare(agent.KindClaudeCode, b.caps, req, agent.Defaults{
		WorkingDir: b.cfg.DefaultWorkingDir,
		Timeout:    b.cfg.DefaultTimeout,
		Env:        b.cfg.Env,
	})
	if err != nil {
		return nil, err
	}
	home := b.cfg.Home
	if home != "" {
		if home, err = filepath.Abs(home); err != nil {
			return nil, agent.BackendError("claude_code error: cannot resolve the configured home", err)
		}
	}
	model := p.Model
	if model == "" {
		model = b.model
	}
	cmd := cliproc.Cmd{
		Path: b.binary,
		Args: buildArgs(p, model),
		Dir:  p.WorkingDir,
		Env:  childEnv(home, p.Env),
	}
	rc := agent.RunConfig{Kind: agent.KindClaudeCode, Capabilities: b.caps, Timeout: p.Timeout}
	return agent.Start(ctx, rc, func(ctx context.Context, out *agent.Emitter) (agent.Completion, error) {
		return drive(ctx, out, p, cmd)
	}), nil
}

// drive runs one claude process and maps its output.
func drive(ctx context.Context, out *agent.Emitter, p *agent.Prepared, cmd cliproc.Cmd) (agent.Completion, error) {
	if p.ExternalSandbox {
		out.Emit(agent.Event{Kind: agent.EventStatus, Channel: "status", Message: msgExternalSandbox})
	}
	m := newMapper()
	emit := func(evs []agent.Event) {
		for _, ev := range evs {
			if !out.Emit(ev) {
				return
			}
		}
	}
	res, err := cliproc.Run(ctx, cmd, func(l cliproc.Line) {
		if l.TooLong > 0 {
			emit(m.tooLong(l.TooLong))
		} else {
			emit(m.mapLine(l.Bytes))
		}
	})
	if err != nil {
		return agent.Completion{}, agent.BackendError("claude_code error: cannot start process", err)
	}
	finalText, data := m.completion()
	comp := agent.Completion{Status: res.Status, FinalText: finalText, Data: data}
	if ctx.Err() != nil {
		// Cancelled or timed out: the run reports that, not the kill.
		emit(m.finish())
		return comp, nil
	}
	if sel := selector(p); sel != nil && sessionNotFound(m, res) {
		m.finish() // the result line's error is replaced by the pinned one
		if sel.Last {
			return agent.Completion{}, agent.BackendError("no session found")
		}
		return agent.Completion{}, agent.BackendError("session not found")
	}
	emit(m.finish())
	if !res.Status.Success() {
		ev := agent.Event{Kind: agent.EventError, Channel: "error", Message: exitMessage(res.Status)}
		if cause := exitCause(m, res); cause != "" {
			ev.Message += ": " + causeMessages[cause]
			ev.Data = json.RawMessage(`{"cause":"` + cause + `"}`)
		}
		emit([]agent.Event{ev})
	}
	return comp, nil
}

// The known causes of a non-zero exit. The exit's error event says the
// cause in its message and names it in its data ({"cause": …}); neither
// quotes claude's output.
const (
	// CauseRootWithoutSandbox: claude, run as root, refuses to skip its
	// permission prompts (--permission-mode bypassPermissions, which every
	// non-interactive run passes, and --dangerously-skip-permissions)
	// unless IS_SANDBOX=1 is in its environment.
	CauseRootWithoutSandbox = "root_without_is_sandbox"
	// CauseNotLoggedIn: claude has no credentials.
	CauseNotLoggedIn = "not_logged_in"
)

var causeMessages = map[string]string{
	CauseRootWithoutSandbox: "claude refuses to skip its permission prompts when run as root; run it as another user, or, when the host sandboxes it, set IS_SANDBOX=1 in its environment (Config.Env)",
	CauseNotLoggedIn:        "claude is not logged in; give it ANTHROPIC_API_KEY in its environment (Config.Env), or log in (claude /login) as the user it runs as",
}

// rootRefusal is what claude writes to stderr when, run as root, it is
// asked to skip its permission prompts.
const rootRefusal = "cannot be used with root/sudo privileges"

// exitCause is the known cause of a non-zero exit ("" for none): claude's
// stderr and output are read for fixed phrases, never quoted.
func exitCause(m *mapper, res cliproc.Result) string {
	switch {
	case res.Status.Signal != "":
		return ""
	case bytes.Contains(res.Stderr, []byte(rootRefusal)):
		return CauseRootWithoutSandbox
	case m.authFailed:
		return CauseNotLoggedIn
	}
	return ""
}

// sessionNotFound reports whether a resume or fork failed because its
// session does not exist: a non-zero exit, no stream parse error, no
// assistant output, and a failed result line whose error texts say so
// (or, when there was no result line at all, stderr saying so).
func sessionNotFound(m *mapper, res cliproc.Result) bool {
	if res.Status.Success() || res.Status.Signal != "" || m.parseErrors > 0 || m.sawAssistant {
		return false
	}
	if m.last != nil {
		return m.last.failed && m.last.notFound
	}
	return notFoundPhrase(string(res.Stderr))
}

// exitMessage is the redacted Error of a non-zero exit.
func exitMessage(s agent.ExitStatus) string {
	if s.Signal != "" {
		return "claude_code exited non-zero: signal=" + safeSignal(s.Signal) + " (output redacted)"
	}
	return "claude_code exited non-zero: code=" + strconv.Itoa(s.Code) + " (output redacted)"
}

// safeSignal keeps a signal name of letters, digits and spaces.
func safeSignal(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ' ') {
			return "unknown"
		}
	}
	return s
}

func selector(p *agent.Prepared) *agent.SessionSelector {
	if p.Fork != nil {
		return p.Fork
	}
	return p.Resume
}

func cloneEnv(env map[string]string) map[string]string {
	if env == nil {
		return nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
	}
	return out
}
