package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/contextos/contextos/agent"
	"github.com/contextos/contextos/agent/claudecode"
	"github.com/contextos/contextos/agent/codex"
)

// The agent command: a coding-agent CLI run through the Universal Agent
// API, its universal events printed as JSON lines.

func agentCommands() []command {
	return []command{
		{"run", "run a prompt on an agent backend (codex, claude_code); print its events and completion as JSON lines", cmdAgentRun},
	}
}

func cmdAgent(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return dispatch("contextos agent", agentCommands(), args, stdin, stdout, stderr)
}

// agentBackend builds the built-in backend of kind, running binary
// ("" = the backend's default).
func agentBackend(kind, binary string) (agent.Backend, error) {
	switch agent.Kind(kind) {
	case agent.KindCodex:
		return codex.New(codex.Config{Binary: binary}), nil
	case agent.KindClaudeCode:
		return claudecode.New(claudecode.Config{Binary: binary}), nil
	}
	return nil, fmt.Errorf("--kind must be %s or %s", agent.KindCodex, agent.KindClaudeCode)
}

// extFlag is a repeatable --ext KEY=JSON flag.
type extFlag map[string]json.RawMessage

func (f extFlag) String() string { return "" }

func (f extFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want KEY=JSON")
	}
	if !json.Valid([]byte(val)) {
		return errors.New("the value of an extension is JSON (a string is quoted: KEY='\"text\"')")
	}
	f[k] = json.RawMessage(val)
	return nil
}

func cmdAgentRun(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent run", flag.ContinueOnError)
	kind := fs.String("kind", "", "the backend: codex or claude_code (required)")
	model := fs.String("model", "", "the model `ID` (agent_api.config.model.v1)")
	dir := fs.String("cd", "", "the agent's working `DIR`")
	binary := fs.String("binary", "", "the CLI's `PATH` (default: CODEX_BINARY/CLAUDE_BINARY or the name on PATH)")
	timeout := fs.Duration("timeout", 0, "end the run after `DURATION` (default: none)")
	ext := extFlag{}
	fs.Var(ext, "ext", "an extension `KEY=JSON` (repeatable), such as agent_api.exec.non_interactive=true")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: contextos agent run --kind codex|claude_code [--model M] [--cd DIR] [--ext KEY=JSON…] PROMPT\n\n"+
			"Prints each universal event as a JSON line and {\"completion\":…} last.\n"+
			"A PROMPT that starts with '-' follows '--'.\n"+
			"Exit 0 when the agent succeeded, 1 when it ended without success (why, on stderr), 2 on an error.")
		fs.PrintDefaults()
	}
	pos, code, ok := parseArgs(fs, args, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "contextos agent run: give exactly one PROMPT argument")
		return exitUsage
	}
	b, err := agentBackend(*kind, *binary)
	if err != nil {
		fmt.Fprintln(stderr, "contextos agent run:", err)
		return exitUsage
	}
	req := agent.RunRequest{Prompt: pos[0], WorkingDir: *dir, Extensions: map[string]json.RawMessage(ext)}
	if *timeout < 0 {
		fmt.Fprintln(stderr, "contextos agent run: --timeout must not be negative")
		return exitUsage
	}
	if *timeout > 0 {
		req.Timeout = agent.Timeout(*timeout)
	}
	if *model != "" {
		m, _ := json.Marshal(*model)
		req.Extensions[agent.CapModel] = m
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first interrupt cancels the run (the agent's process group is
	// killed); a second one ends this process the default way.
	context.AfterFunc(ctx, stop)
	return agentRun(ctx, b, req, stdout, stderr)
}

// agentRun runs req on b, printing the events and the completion.
func agentRun(ctx context.Context, b agent.Backend, req agent.RunRequest, stdout, stderr io.Writer) int {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	r, err := b.Run(ctx, req)
	if err != nil {
		fmt.Fprintln(stderr, "contextos agent run:", err)
		return exitUsage
	}
	// lastError is the run's last error event: a failed run's exit error,
	// which names a known cause (claude as root, say).
	lastError := ""
	for ev := range r.Events() {
		if ev.Kind == agent.EventError {
			lastError = ev.Message
		}
		if err := enc.Encode(ev); err != nil {
			r.Close() // stdout is gone: stop forwarding, let the agent finish
			break
		}
	}
	// After an interrupt the run is cancelled; Wait returns once the
	// agent's process group is gone.
	comp, err := r.Wait(context.WithoutCancel(ctx))
	if err != nil {
		fmt.Fprintln(stderr, "contextos agent run:", err)
		return exitUsage
	}
	if err := enc.Encode(struct {
		Completion agent.Completion `json:"completion"`
	}{comp}); err != nil {
		return exitUsage
	}
	if !comp.Status.Success() {
		// Said on stderr too: the events scroll by; the reason should not.
		msg := "the agent ended without success (" + comp.Status.String() + ")"
		if lastError != "" {
			msg += ": " + lastError
		}
		fmt.Fprintln(stderr, "contextos agent run:", msg)
		return exitInvalid
	}
	return exitOK
}
