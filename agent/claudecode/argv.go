package claudecode

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/contextos/contextos/agent"
)

// buildArgs is claude's argv for p, in upstream's order:
//
//	--print --output-format stream-json [--model <id>]
//	[--permission-mode bypassPermissions [--dangerously-skip-permissions]]
//	[--add-dir <d1> <d2> …] [--continue] [--fork-session]
//	--include-partial-messages [--resume <id>] --verbose [--] <prompt>
//
// The prompt is the last token. claude parses its argv with commander,
// where "--" ends the options; it is put before a prompt that starts with
// "-", which would otherwise be taken for an option (and only then, so
// every other argv is upstream's exactly). --add-dir is variadic, so a
// flag always follows its directories (they are absolute, never "-…").
func buildArgs(p *agent.Prepared, model string) []string {
	args := make([]string, 0, 16+len(p.AddDirs))
	args = append(args, "--print", "--output-format", "stream-json")
	if model != "" {
		args = append(args, "--model", model)
	}
	if p.NonInteractive {
		args = append(args, "--permission-mode", "bypassPermissions")
		if p.ExternalSandbox {
			args = append(args, "--dangerously-skip-permissions")
		}
	}
	if len(p.AddDirs) > 0 {
		args = append(args, "--add-dir")
		args = append(args, p.AddDirs...)
	}
	sel, fork := p.Resume, false
	if p.Fork != nil {
		sel, fork = p.Fork, true
	}
	if sel != nil && sel.Last {
		args = append(args, "--continue")
	}
	if fork {
		args = append(args, "--fork-session")
	}
	args = append(args, "--include-partial-messages")
	if sel != nil && !sel.Last {
		args = append(args, "--resume", sel.ID)
	}
	args = append(args, "--verbose")
	if strings.HasPrefix(p.Prompt, "-") {
		args = append(args, "--")
	}
	return append(args, p.Prompt)
}

// childEnv is the overlay on this process's environment for the child:
// DISABLE_AUTOUPDATER=1 unless this process has it set, the home
// isolation when home is set, then env (the config's and the request's,
// merged), which wins over both.
func childEnv(home string, env map[string]string) map[string]string {
	out := make(map[string]string, len(env)+6)
	if _, set := os.LookupEnv("DISABLE_AUTOUPDATER"); !set {
		out["DISABLE_AUTOUPDATER"] = "1"
	}
	if home != "" {
		out["CLAUDE_HOME"] = home
		out["HOME"] = home
		out["XDG_CONFIG_HOME"] = filepath.Join(home, ".config")
		out["XDG_DATA_HOME"] = filepath.Join(home, ".local", "share")
		out["XDG_CACHE_HOME"] = filepath.Join(home, ".cache")
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}
