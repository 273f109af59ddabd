package claudecode

import (
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contextos/contextos/agent/agenttest"
)

// The fake claude is this test binary re-executed: TestMain plays the
// scenario named by FAKE_CLAUDE_SCENARIO instead of running tests. Like
// upstream's fakes it first asserts the argv every run must have
// (--print --output-format stream-json, --permission-mode
// bypassPermissions, --include-partial-messages, --verbose, the prompt
// last); a failed assertion prints an assistant text line with the reason
// and exits 2.

//go:embed testdata/scenarios
var scenarioFS embed.FS

const (
	envScenario = "FAKE_CLAUDE_SCENARIO"
	// envPrompt is the prompt the fake expects as its last token.
	envPrompt = "FAKE_CLAUDE_PROMPT"
	// envInteractive "1" makes the fake expect no --permission-mode.
	envInteractive = "FAKE_CLAUDE_INTERACTIVE"
	// envMarker names a file the fake creates as soon as it starts.
	envMarker = "FAKE_CLAUDE_MARKER"
)

// The sentinels the fakes print to stderr and in raw lines; none may
// reach an event, an error or a completion.
const (
	stderrSecret = "RAW-STDERR-SECRET"
	lineSecret   = "RAW-LINE-SECRET"
)

// resumeID is the unknown session id of the resume_not_found scenario.
const resumeID = "0b6c8f3e-1111-4222-8333-944455556666"

// fakeScenario is what the fake claude does.
type fakeScenario struct {
	// file is a testdata/scenarios file whose lines are printed; a line
	// "@@A<n>@@" inside is n letters a.
	file string
	// output computes the lines instead (given the argv).
	output func(args []string) []string
	stderr string
	exit   int
	crlf   bool
	// block keeps the fake alive after its output, until it is killed.
	block bool
	// check is an extra argv assertion ("" when it holds).
	check func(args []string) string
}

var fakeScenarios = map[string]fakeScenario{
	"partial_text":              {file: "partial_text.jsonl"},
	"tool_roundtrip":            {file: "tool_roundtrip.jsonl"},
	"not_logged_in":             {file: "not_logged_in.jsonl", exit: 1},
	"resume_not_found":          {file: "resume_not_found.jsonl", exit: 1, stderr: "No conversation found with session ID: " + resumeID, check: wantSubsequence("--resume", resumeID, "--verbose")},
	"resume_not_found_upstream": {file: "resume_not_found_upstream.jsonl", exit: 1},
	"max_turns":                 {file: "max_turns.jsonl", exit: 1},
	"max_budget":                {file: "max_budget.jsonl", exit: 1},
	"slow":                      {file: "slow.jsonl", block: true, stderr: stderrSecret + "-CANCEL"},
	"huge_text":                 {file: "huge_text.jsonl", crlf: true},
	"malformed":                 {file: "malformed.jsonl"},
	"no_verbose":                {exit: 1, stderr: "Error: When using --print, --output-format=stream-json requires --verbose"},
	"root_bypass":               {exit: 1, stderr: "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"},
	"exit3":                     {output: func([]string) []string { return []string{`{"type":"system","subtype":"init","session_id":"sess-3"}`} }, exit: 3},
	"stderr_not_found":          {exit: 1, stderr: "Error: no session found in this directory"},
	"argv":                      {output: argvOutput},
	"env":                       {output: envOutput},
	"marker":                    {output: func([]string) []string { return nil }},
	// A run whose prompt came partly from claude's prompt cache: 120
	// uncached input tokens, 2000 read from the cache, 300 written to it,
	// 25 output tokens; its answer is a plan.
	"cached_usage": {output: func([]string) []string {
		return []string{
			`{"type":"system","subtype":"init","session_id":"sess-cache"}`,
			assistantLine(`{"decision":{"decision_key":"code.change.apply","outcome":"applied"}}`),
			`{"type":"result","subtype":"success","is_error":false,"session_id":"sess-cache","num_turns":1,"total_cost_usd":0.01,` +
				`"usage":{"input_tokens":120,"cache_read_input_tokens":2000,"cache_creation_input_tokens":300,"output_tokens":25}}`,
		}
	}},
	// agenttest.ScenarioLeakedKey: claude 2.1's answer to a refused key
	// (an api_retry, the synthetic assistant text, a failed result), with
	// an API that echoes the key.
	"leaked_key": {exit: 1, output: func([]string) []string {
		msg := "Invalid API key · " + agenttest.APIKey + " is not valid"
		res, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": true, "api_error_status": 401,
			"session_id": "sess-key", "num_turns": 1, "result": msg, "errors": []string{"401 " + agenttest.APIKey}})
		return []string{
			`{"type":"system","subtype":"init","session_id":"sess-key","apiKeySource":"ANTHROPIC_API_KEY"}`,
			`{"type":"system","subtype":"api_retry","attempt":1,"error_status":401,"error":"authentication_failed","session_id":"sess-key"}`,
			assistantLine(msg),
			string(res),
		}
	}},
	// agenttest.ScenarioMalformed: a malformed line holding the suite's
	// secret mid-stream, then text.
	"conformance_malformed": {output: func([]string) []string {
		return []string{
			`{"type":"system","subtype":"init","session_id":"sess-c"}`,
			`{"type":"assistant","session_id":"sess-c","message":{"content":[{"type":"text","text":"` + agenttest.Secret,
			assistantLine("after the bad line"),
			fakeResult,
		}
	}},
}

// fakeMain plays scenario name and returns the exit code.
func fakeMain(name string) int {
	if path := os.Getenv(envMarker); path != "" {
		if err := os.WriteFile(path, []byte("spawned"), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "fake claude: cannot write marker")
			return 98
		}
	}
	sc, ok := fakeScenarios[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "fake claude: unknown scenario")
		return 97
	}
	args := os.Args[1:]
	reason := checkArgv(args)
	if reason == "" && sc.check != nil {
		reason = sc.check(args)
	}
	if reason != "" {
		fmt.Println(assistantLine("fake claude: argv assertion failed: " + reason))
		return 2
	}
	if sc.stderr != "" {
		fmt.Fprintln(os.Stderr, sc.stderr)
	}
	fmt.Fprintln(os.Stderr, "noise "+stderrSecret+" token=sk-ant-0000 "+agenttest.Secret)
	var lines []string
	if sc.file != "" {
		b, err := scenarioFS.ReadFile("testdata/scenarios/" + sc.file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake claude: missing scenario file")
			return 96
		}
		lines = strings.Split(strings.TrimSuffix(expandA(string(b)), "\n"), "\n")
	} else if sc.output != nil {
		lines = sc.output(args)
	}
	eol := "\n"
	if sc.crlf {
		eol = "\r\n"
	}
	for _, l := range lines {
		os.Stdout.WriteString(l + eol)
	}
	if sc.block {
		if path := os.Getenv(agenttest.PIDFileEnv); path != "" {
			if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				fmt.Fprintln(f, os.Getpid())
				f.Close()
			}
		}
		for {
			time.Sleep(time.Hour)
		}
	}
	return sc.exit
}

// checkArgv asserts what every run's argv must have.
func checkArgv(args []string) string {
	n := len(args)
	if n < 6 || !slices.Equal(args[:3], []string{"--print", "--output-format", "stream-json"}) {
		return "argv must start with --print --output-format stream-json"
	}
	before := args[n-2]
	if before == "--" {
		before = args[n-3]
	}
	if before != "--verbose" {
		return "the prompt must come last, right after --verbose"
	}
	if want, ok := os.LookupEnv(envPrompt); ok && args[n-1] != want {
		return "the last token is not the prompt"
	}
	if !slices.Contains(args, "--include-partial-messages") {
		return "missing --include-partial-messages"
	}
	bypass := wantSubsequence("--permission-mode", "bypassPermissions")(args) == ""
	if os.Getenv(envInteractive) == "1" {
		if slices.Contains(args, "--permission-mode") {
			return "unexpected --permission-mode"
		}
	} else if !bypass {
		return "missing --permission-mode bypassPermissions"
	}
	return ""
}

// wantSubsequence asserts that want appears as consecutive tokens.
func wantSubsequence(want ...string) func([]string) string {
	return func(args []string) string {
		for i := 0; i+len(want) <= len(args); i++ {
			if slices.Equal(args[i:i+len(want)], want) {
				return ""
			}
		}
		return "missing " + strings.Join(want, " ")
	}
}

var aRun = regexp.MustCompile(`@@A(\d+)@@`)

// expandA expands "@@A<n>@@" to n letters a.
func expandA(s string) string {
	return aRun.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(aRun.FindStringSubmatch(m)[1])
		return strings.Repeat("a", n)
	})
}

// assistantLine is an assistant line with one text block.
func assistantLine(text string) string {
	b, _ := json.Marshal(map[string]any{
		"type":       "assistant",
		"session_id": "sess-fake",
		"message":    map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}},
	})
	return string(b)
}

const fakeResult = `{"type":"result","subtype":"success","is_error":false,"session_id":"sess-fake","num_turns":1}`

// argvOutput reports the argv as the final text.
func argvOutput(args []string) []string {
	b, _ := json.Marshal(args)
	return []string{assistantLine(string(b)), fakeResult}
}

// envVars are the variables the env scenario reports.
var envVars = []string{
	"CLAUDE_HOME", "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME",
	"DISABLE_AUTOUPDATER", "CFG_ONLY", "REQ_ONLY", "BOTH",
}

// envOutput reports the working directory and envVars (unset ones as
// "<unset>") as the final text.
func envOutput([]string) []string {
	got := map[string]string{}
	for _, k := range envVars {
		v, ok := os.LookupEnv(k)
		if !ok {
			v = "<unset>"
		}
		got[k] = v
	}
	got["cwd"], _ = os.Getwd()
	b, _ := json.Marshal(got)
	return []string{assistantLine(string(b)), fakeResult}
}
