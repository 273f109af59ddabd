package agent_test

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/agent"
)

const pk agent.Kind = "toy"

// allCaps advertises every universal key and two toy keys.
var allCaps = agent.NewCapabilities(agent.CapRun, agent.CapEvents, agent.CapCancel, agent.CapNonInteractive,
	agent.CapModel, agent.CapAddDirs, agent.CapSessionResume, agent.CapSessionFork, agent.CapExternalSandbox,
	"backend.toy.exec.mode", "backend.toy.flag")

func ext(kv ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = json.RawMessage(kv[i+1])
	}
	return m
}

func req(kv ...string) agent.RunRequest {
	return agent.RunRequest{Prompt: "do it", Extensions: ext(kv...)}
}

// wantErr checks err's kind and exact message, and that no secret leaks.
func wantErr(t *testing.T, err error, kind error, msg string) {
	t.Helper()
	if err == nil || !errors.Is(err, kind) || err.Error() != msg {
		t.Fatalf("err = %v, want %v %q", err, kind, msg)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("err %q contains the secret", err)
	}
}

func TestEmptyPromptShortCircuitsAllowlistAndPolicy(t *testing.T) {
	called := false
	d := agent.Defaults{
		CheckValue:   func(string, json.RawMessage) error { called = true; return nil },
		CheckRequest: func(*agent.Prepared) error { called = true; return nil },
	}
	for _, prompt := range []string{"", " ", "\t\n \r"} {
		r := agent.RunRequest{Prompt: prompt, Env: map[string]string{"=bad": "x"}, Timeout: agent.Timeout(-1),
			Extensions: ext("agent_api.unknown.v1", `"`+secret+`"`, "backend.toy.flag", `1`)}
		_, err := agent.Prepare(pk, allCaps, r, d)
		wantErr(t, err, agent.ErrInvalidRequest, "invalid request: prompt must not be empty")
	}
	if called {
		t.Error("a policy hook ran for an empty prompt")
	}
}

func TestUnknownExtensionKeyIsRejected(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		r    agent.RunRequest
		want string
	}{
		{"unknown_key", req("agent_api.unknown.v1", `"`+secret+`"`), "agent_api.unknown.v1"},
		{"other_backend_namespace", req("backend.codex.exec.sandbox_mode", `"`+secret+`"`), "backend.codex.exec.sandbox_mode"},
		{"own_namespace_not_advertised", req("backend.toy.other", `"`+secret+`"`), "backend.toy.other"},
		{"no_dot", req("toyflag", `true`), "toyflag"},
		{"not_namespaced", req("other.flag", `true`), "other.flag"},
		{"uppercase_is_not_echoed", req("Agent_api."+secret, `true`), "<invalid>"},
		{"space_is_not_echoed", req("agent_api.x "+secret, `true`), "<invalid>"},
		{"empty_key", req("", `true`), "<invalid>"},
		// R0 comes before value validation: a bad value of an unsupported key is still R0's.
		{"unsupported_before_value", req(agent.CapModel, `7`), agent.CapModel},
	}
	caps := agent.NewCapabilities(agent.CapRun, agent.CapEvents, "backend.toy.flag", "toyflag", "other.flag")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := agent.Prepare(pk, caps, c.r, agent.Defaults{})
			wantErr(t, err, agent.ErrUnsupportedCapability, "unsupported capability for toy: "+c.want)
			var ae *agent.Error
			if !errors.As(err, &ae) || ae.AgentKind != "toy" || ae.Capability != c.want {
				t.Errorf("fields %+v", ae)
			}
		})
	}
}

func TestUnknownExtensionKeyReportsLexicographicallySmallest(t *testing.T) {
	keys := []string{"backend.zzz.x", "agent_api.zz.v1", "agent_api.b.v1", "agent_api.ba.v1", "backend.toy.zz", "agent_api.exec.non_interactive"}
	// Whatever the map's iteration order, the smallest unsupported key is reported.
	for i := range 50 {
		r := agent.RunRequest{Prompt: "p", Extensions: map[string]json.RawMessage{}}
		for j, k := range keys {
			r.Extensions[k] = json.RawMessage(strconv.Itoa(i + j))
		}
		_, err := agent.Prepare(pk, agent.NewCapabilities(agent.CapNonInteractive), r, agent.Defaults{})
		wantErr(t, err, agent.ErrUnsupportedCapability, "unsupported capability for toy: agent_api.b.v1")
	}
}

func TestAllKeysAllowedPasses(t *testing.T) {
	dir := t.TempDir()
	r := req(agent.CapNonInteractive, `true`, agent.CapModel, `"m"`, agent.CapAddDirs, `{"dirs":["`+dir+`"]}`,
		agent.CapSessionResume, `{"selector":"last"}`, "backend.toy.flag", `{"any":"json"}`)
	p, err := agent.Prepare(pk, allCaps, r, toyKeys)
	if err != nil {
		t.Fatal(err)
	}
	if !p.NonInteractive || !p.NonInteractiveSet || p.Model != "m" || len(p.AddDirs) != 1 || p.Resume == nil || !p.Resume.Last || p.Fork != nil {
		t.Errorf("prepared %+v", p)
	}
	if got := slices.Sorted(maps.Keys(p.Extensions)); len(got) != 5 {
		t.Errorf("extensions %v", got)
	}
}

func TestEnvMergePrecedence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		cfg, reqE map[string]string
		want      map[string]string
	}{
		{"request_wins", map[string]string{"A": "cfg", "B": "cfg"}, map[string]string{"B": "req", "C": "req"}, map[string]string{"A": "cfg", "B": "req", "C": "req"}},
		{"both_empty", nil, nil, map[string]string{}},
		{"config_only", map[string]string{"A": "1"}, nil, map[string]string{"A": "1"}},
		{"request_only", nil, map[string]string{"A": "1"}, map[string]string{"A": "1"}},
		{"empty_value_wins", map[string]string{"A": "cfg"}, map[string]string{"A": ""}, map[string]string{"A": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			before := os.Environ()
			p, err := agent.Prepare(pk, allCaps, agent.RunRequest{Prompt: "p", Env: c.reqE}, agent.Defaults{Env: c.cfg})
			if err != nil {
				t.Fatal(err)
			}
			if p.Env == nil || !maps.Equal(p.Env, c.want) {
				t.Errorf("env %v, want %v", p.Env, c.want)
			}
			if !slices.Equal(before, os.Environ()) {
				t.Error("Prepare changed this process's environment")
			}
		})
	}
	for _, env := range []map[string]string{{"": "x"}, {"A=" + secret: "x"}, {"A\x00": "x"}} {
		_, err := agent.Prepare(pk, allCaps, agent.RunRequest{Prompt: "p", Env: env}, agent.Defaults{})
		wantErr(t, err, agent.ErrInvalidRequest, "invalid request: env names must be non-empty, without '=' or NUL bytes")
	}
	_, err := agent.Prepare(pk, allCaps, agent.RunRequest{Prompt: "p"}, agent.Defaults{Env: map[string]string{"A": secret + "\x00"}})
	wantErr(t, err, agent.ErrInvalidRequest, "invalid request: env values must not contain NUL bytes")
}

func TestTimeoutDerivationMatrix(t *testing.T) {
	cases := []struct {
		name string
		req  *time.Duration
		def  time.Duration
		want time.Duration
	}{
		{"none", nil, 0, 0},
		{"default_only", nil, 5 * time.Second, 5 * time.Second},
		{"request_only", agent.Timeout(3 * time.Second), 0, 3 * time.Second},
		{"request_beats_default", agent.Timeout(3 * time.Second), 5 * time.Second, 3 * time.Second},
		{"request_longer_than_default", agent.Timeout(time.Hour), 5 * time.Second, time.Hour},
		{"explicit_zero_is_preserved", agent.Timeout(0), 5 * time.Second, 0},
		{"negative_default_is_none", nil, -time.Second, 0},
	}
	for _, c := range cases {
		p, err := agent.Prepare(pk, allCaps, agent.RunRequest{Prompt: "p", Timeout: c.req}, agent.Defaults{Timeout: c.def})
		if err != nil || p.Timeout != c.want {
			t.Errorf("%s: timeout %v, %v; want %v", c.name, p.Timeout, err, c.want)
		}
	}
	_, err := agent.Prepare(pk, allCaps, agent.RunRequest{Prompt: "p", Timeout: agent.Timeout(-time.Nanosecond)}, agent.Defaults{})
	wantErr(t, err, agent.ErrInvalidRequest, "invalid request: timeout must not be negative")
}

func TestWorkingDirPrecedence(t *testing.T) {
	cwd, _ := os.Getwd()
	cases := []struct{ req, def, want string }{
		{"", "", ""},
		{"/req", "/def", "/req"},
		{"", "/def", "/def"},
		{"rel/dir", "/def", filepath.Join(cwd, "rel/dir")},
		{"", "rel", filepath.Join(cwd, "rel")},
		{"/a/../b/./c", "", "/b/c"},
	}
	for _, c := range cases {
		p, err := agent.Prepare(pk, allCaps, agent.RunRequest{Prompt: "p", WorkingDir: c.req}, agent.Defaults{WorkingDir: c.def})
		if err != nil || p.WorkingDir != c.want {
			t.Errorf("wd %q/%q: %q, %v; want %q", c.req, c.def, p.WorkingDir, err, c.want)
		}
	}
	_, err := agent.Prepare(pk, allCaps, agent.RunRequest{Prompt: "p", WorkingDir: "/x\x00" + secret}, agent.Defaults{})
	wantErr(t, err, agent.ErrInvalidRequest, "invalid request: working dir must not contain NUL bytes")
}

func TestPromptMustBeText(t *testing.T) {
	for _, prompt := range []string{"a\x00" + secret, "a\xff" + secret} {
		_, err := agent.Prepare(pk, allCaps, agent.RunRequest{Prompt: prompt}, agent.Defaults{})
		wantErr(t, err, agent.ErrInvalidRequest, "invalid request: prompt must be UTF-8 text without NUL bytes")
	}
}

func TestNonInteractive(t *testing.T) {
	p, err := agent.Prepare(pk, allCaps, req(), agent.Defaults{})
	if err != nil || !p.NonInteractive || p.NonInteractiveSet {
		t.Fatalf("default: %+v, %v", p, err)
	}
	p, err = agent.Prepare(pk, allCaps, req(agent.CapNonInteractive, ` false `), agent.Defaults{})
	if err != nil || p.NonInteractive || !p.NonInteractiveSet {
		t.Fatalf("false: %+v, %v", p, err)
	}
	for _, v := range []string{`"true"`, `1`, `null`, `{}`, `"` + secret + `"`, `tru`} {
		_, err := agent.Prepare(pk, allCaps, req(agent.CapNonInteractive, v), agent.Defaults{})
		wantErr(t, err, agent.ErrInvalidRequest, "invalid request: invalid agent_api.exec.non_interactive")
	}
}

func TestModelID(t *testing.T) {
	p, err := agent.Prepare(pk, allCaps, req(), agent.Defaults{})
	if err != nil || p.Model != "" {
		t.Fatalf("absent: %q, %v", p.Model, err)
	}
	for in, want := range map[string]string{`"gpt-5"`: "gpt-5", `"  claude-opus \n"`: "claude-opus", `"` + strings.Repeat("m", 128) + `"`: strings.Repeat("m", 128), `"\u00a0m\u00a0"`: "m"} {
		p, err := agent.Prepare(pk, allCaps, req(agent.CapModel, in), agent.Defaults{})
		if err != nil || p.Model != want {
			t.Errorf("model %s: %q, %v; want %q", in, p.Model, err, want)
		}
	}
	bad := []string{`7`, `null`, `true`, `["m"]`, `{"id":"m"}`, `""`, `"   "`, `"` + strings.Repeat("m", 129) + `"`,
		`"` + strings.Repeat("é", 65) + `"`, `"m\u0000` + secret + `"`, `"` + secret + `\n` + secret + `"`}
	for _, v := range bad {
		_, err := agent.Prepare(pk, allCaps, req(agent.CapModel, v), agent.Defaults{})
		wantErr(t, err, agent.ErrInvalidRequest, "invalid request: invalid agent_api.config.model.v1")
	}
}

func TestAddDirs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, d := range []string{"a", "b", "a/c", "é"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	dirs := func(ds ...string) string { return js(map[string]any{"dirs": ds}) }
	const (
		rootMsg = "invalid request: invalid agent_api.exec.add_dirs.v1"
		listMsg = "invalid request: invalid agent_api.exec.add_dirs.v1.dirs"
	)
	item := func(i int) string { return listMsg + "[" + strconv.Itoa(i) + "]" }
	seventeen := make([]string, 17)
	for i := range seventeen {
		seventeen[i] = root
	}
	cases := []struct {
		name, value, wd string
		want            []string // nil with wantErr
		wantErr         string
	}{
		{"absolute_without_wd", dirs(filepath.Join(root, "a")), "", []string{filepath.Join(root, "a")}, ""},
		{"relative_resolved_from_wd", dirs("a", "./b/"), root, []string{filepath.Join(root, "a"), filepath.Join(root, "b")}, ""},
		{"relative_without_wd", dirs("a"), "", nil, item(0)},
		{"lexical_normalisation_and_dedup", dirs("a/c/..", "a", root+"//a/./", "b", "a"), root, []string{filepath.Join(root, "a"), filepath.Join(root, "b")}, ""},
		{"outside_the_wd", dirs("../a", root), filepath.Join(root, "b"), []string{filepath.Join(root, "a"), root}, ""},
		{"unicode_whitespace_trimmed", js(map[string]any{"dirs": []string{"\u00a0\u2003a\t\n", " é "}}), root, []string{filepath.Join(root, "a"), filepath.Join(root, "é")}, ""},
		{"sixteen_entries", dirs(seventeen[:16]...), "", []string{root}, ""},
		{"not_an_object", `["a"]`, root, nil, rootMsg},
		{"string", `"` + secret + `"`, root, nil, rootMsg},
		{"null", `null`, root, nil, rootMsg},
		{"unknown_key", `{"dirs":["a"],"` + secret + `":1}`, root, nil, rootMsg},
		{"missing_dirs", `{}`, root, nil, rootMsg},
		{"dirs_not_array", `{"dirs":"a"}`, root, nil, listMsg},
		{"dirs_null", `{"dirs":null}`, root, nil, listMsg},
		{"dirs_empty", `{"dirs":[]}`, root, nil, listMsg},
		{"seventeen_entries", dirs(seventeen...), "", nil, listMsg},
		{"entry_not_string", `{"dirs":["a",7]}`, root, nil, item(1)},
		{"entry_null", `{"dirs":[null]}`, root, nil, item(0)},
		{"entry_blank", dirs("a", "b", " \u2003\t"), root, nil, item(2)},
		{"entry_empty", dirs(""), root, nil, item(0)},
		{"entry_over_1024_bytes", dirs(root + "/" + strings.Repeat("x", 1024)), "", nil, item(0)},
		{"entry_multibyte_under_1024_chars_over_1024_bytes", dirs(root + "/" + strings.Repeat("é", 600)), "", nil, item(0)},
		{"entry_missing", dirs("a", "missing-"+secret), root, nil, item(1)},
		{"entry_is_a_file", dirs(file), "", nil, item(0)},
		{"entry_nul", dirs("a\x00" + secret), root, nil, item(0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, err := agent.Prepare(pk, allCaps, agent.RunRequest{Prompt: "p", WorkingDir: c.wd, Extensions: ext(agent.CapAddDirs, c.value)}, agent.Defaults{})
			if c.wantErr != "" {
				wantErr(t, err, agent.ErrInvalidRequest, c.wantErr)
				if strings.Contains(err.Error(), root) {
					t.Error("the error echoes a path")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.AddDirs, c.want) {
				t.Fatalf("AddDirs = %q, want %q", p.AddDirs, c.want)
			}
		})
	}
	// The effective working dir (the default's) resolves relative entries.
	p, err := agent.Prepare(pk, allCaps, req(agent.CapAddDirs, dirs("a")), agent.Defaults{WorkingDir: root})
	if err != nil || !slices.Equal(p.AddDirs, []string{filepath.Join(root, "a")}) {
		t.Fatalf("default wd: %q, %v", p.AddDirs, err)
	}
	if p, err := agent.Prepare(pk, allCaps, req(), agent.Defaults{}); err != nil || p.AddDirs != nil {
		t.Fatalf("absent: %q, %v", p.AddDirs, err)
	}
}

func TestSessionSelectors(t *testing.T) {
	t.Parallel()
	for _, key := range []string{agent.CapSessionResume, agent.CapSessionFork} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			get := func(p *agent.Prepared) *agent.SessionSelector {
				if key == agent.CapSessionResume {
					return p.Resume
				}
				return p.Fork
			}
			for v, want := range map[string]agent.SessionSelector{
				`{"selector":"last"}`:               {Last: true},
				`{"selector":"id","id":"thr_1"}`:    {ID: "thr_1"},
				`{"id":"  thr_2 ","selector":"id"}`: {ID: "thr_2"},
			} {
				p, err := agent.Prepare(pk, allCaps, req(key, v), agent.Defaults{})
				if err != nil || get(p) == nil || *get(p) != want {
					t.Errorf("%s: %+v, %v", v, p, err)
				}
			}
			for _, v := range []string{`"last"`, `null`, `{}`, `{"selector":"first"}`, `{"selector":null}`, `{"selector":"last","id":"x"}`,
				`{"selector":"id"}`, `{"selector":"id","id":""}`, `{"selector":"id","id":"  "}`, `{"selector":"id","id":7}`,
				`{"selector":"id","id":"-` + secret + `"}`, `{"selector":"id","id":"a\n` + secret + `"}`,
				`{"selector":"id","id":"x","extra":1}`, `{"selector":"last","extra":1}`, `{"selector":"id","id":"` + strings.Repeat("i", 1025) + `"}`} {
				_, err := agent.Prepare(pk, allCaps, req(key, v), agent.Defaults{})
				wantErr(t, err, agent.ErrInvalidRequest, "invalid request: invalid "+key)
			}
		})
	}
}

func TestResumeForkContradiction(t *testing.T) {
	both := req(agent.CapSessionResume, `{"selector":"last"}`, agent.CapSessionFork, `{"selector":"last"}`)
	_, err := agent.Prepare(pk, allCaps, both, agent.Defaults{})
	wantErr(t, err, agent.ErrInvalidRequest, "invalid request: agent_api.session.resume.v1 and agent_api.session.fork.v1 are mutually exclusive")

	// R0 beats the contradiction, whichever of the two is unsupported.
	for _, supported := range []string{agent.CapSessionResume, agent.CapSessionFork} {
		other := agent.CapSessionFork
		if supported == agent.CapSessionFork {
			other = agent.CapSessionResume
		}
		_, err := agent.Prepare(pk, agent.NewCapabilities(supported), both, agent.Defaults{})
		wantErr(t, err, agent.ErrUnsupportedCapability, "unsupported capability for toy: "+other)
	}
	// The contradiction applies only once every key passed R0.
	withUnknown := req(agent.CapSessionResume, `{"selector":"last"}`, agent.CapSessionFork, `{"selector":"last"}`, "backend.toy.zz", `1`)
	_, err = agent.Prepare(pk, allCaps, withUnknown, agent.Defaults{})
	wantErr(t, err, agent.ErrUnsupportedCapability, "unsupported capability for toy: backend.toy.zz")
	// Values are checked before the contradiction.
	badValue := req(agent.CapSessionResume, `{"selector":"last"}`, agent.CapSessionFork, `{}`)
	_, err = agent.Prepare(pk, allCaps, badValue, agent.Defaults{})
	wantErr(t, err, agent.ErrInvalidRequest, "invalid request: invalid agent_api.session.fork.v1")
}

func TestExternalSandbox(t *testing.T) {
	t.Parallel()
	p, err := agent.Prepare(pk, allCaps, req(agent.CapExternalSandbox, `true`, agent.CapNonInteractive, `true`, "backend.toy.flag", `1`), toyKeys)
	if err != nil || !p.ExternalSandbox || !p.NonInteractive {
		t.Fatalf("accepted: %+v, %v", p, err)
	}
	if p, err := agent.Prepare(pk, allCaps, req(agent.CapExternalSandbox, `false`, "backend.toy.exec.mode", `"x"`), toyKeys); err != nil || p.ExternalSandbox {
		t.Fatalf("false with exec keys: %+v, %v", p, err)
	}
	cases := []struct {
		name string
		r    agent.RunRequest
		caps agent.Capabilities
		kind error
		msg  string
	}{
		{"type_mismatch", req(agent.CapExternalSandbox, `"true"`), allCaps, agent.ErrInvalidRequest, "invalid request: invalid agent_api.exec.external_sandbox.v1"},
		{"with_interactive", req(agent.CapExternalSandbox, `true`, agent.CapNonInteractive, `false`), allCaps, agent.ErrInvalidRequest,
			"invalid request: agent_api.exec.external_sandbox.v1 requires agent_api.exec.non_interactive"},
		{"with_exec_key", req(agent.CapExternalSandbox, `true`, "backend.toy.exec.mode", `"x"`), allCaps, agent.ErrInvalidRequest,
			"invalid request: agent_api.exec.external_sandbox.v1 cannot be combined with backend.toy.exec.* keys"},
		// Not advertised (no opt-in): R0 rejects it before any policy rule.
		{"not_advertised_before_policy", req(agent.CapExternalSandbox, `true`, agent.CapNonInteractive, `false`),
			agent.NewCapabilities(agent.CapNonInteractive), agent.ErrUnsupportedCapability, "unsupported capability for toy: agent_api.exec.external_sandbox.v1"},
	}
	for _, c := range cases {
		_, err := agent.Prepare(pk, c.caps, c.r, toyKeys)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			wantErr(t, err, c.kind, c.msg)
		})
	}
}

func TestBackendHooksRunInOrder(t *testing.T) {
	var calls []string
	d := agent.Defaults{
		Keys: toyKeys.Keys,
		CheckValue: func(k string, v json.RawMessage) error {
			calls = append(calls, "value:"+k)
			if string(v) == `"bad"` {
				return agent.InvalidRequest("invalid " + k)
			}
			return nil
		},
		CheckRequest: func(p *agent.Prepared) error {
			calls = append(calls, "request")
			if p.Model == "refused" {
				return agent.InvalidRequest("the model cannot be combined with backend.toy.flag")
			}
			return nil
		},
	}
	_, err := agent.Prepare(pk, allCaps, req("backend.toy.flag", `1`, "backend.toy.exec.mode", `"x"`, agent.CapModel, `"m"`), d)
	if err != nil || strings.Join(calls, ",") != "value:backend.toy.exec.mode,value:backend.toy.flag,request" {
		t.Fatalf("calls %v, %v", calls, err)
	}
	calls = nil
	_, err = agent.Prepare(pk, allCaps, req("backend.toy.flag", `"bad"`, agent.CapModel, `"m"`), d)
	wantErr(t, err, agent.ErrInvalidRequest, "invalid request: invalid backend.toy.flag")
	if strings.Join(calls, ",") != "value:backend.toy.flag" {
		t.Errorf("calls %v", calls)
	}
	_, err = agent.Prepare(pk, allCaps, req(agent.CapModel, `"refused"`), d)
	wantErr(t, err, agent.ErrInvalidRequest, "invalid request: the model cannot be combined with backend.toy.flag")
	// Values that are not JSON are refused before the hook sees them.
	calls = nil
	_, err = agent.Prepare(pk, allCaps, req("backend.toy.flag", `{`+secret), d)
	wantErr(t, err, agent.ErrInvalidRequest, "invalid request: invalid backend.toy.flag")
	if len(calls) != 0 {
		t.Errorf("calls %v", calls)
	}
}

func TestPreparedDoesNotAliasTheRequest(t *testing.T) {
	r := req(agent.CapModel, `"m"`)
	r.Env = map[string]string{"A": "1"}
	p, err := agent.Prepare(pk, allCaps, r, agent.Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	r.Env["A"] = "2"
	r.Extensions[agent.CapModel][1] = 'X'
	r.Extensions["backend.toy.flag"] = json.RawMessage(`1`)
	if p.Env["A"] != "1" || string(p.Extensions[agent.CapModel]) != `"m"` || len(p.Extensions) != 1 {
		t.Errorf("the prepared request changed with the request: %v %s", p.Env, p.Extensions[agent.CapModel])
	}
}

// toyKeys declares the toy backend's own extension keys.
var toyKeys = agent.Defaults{Keys: []string{"backend.toy.exec.mode", "backend.toy.flag"}}

// TestOnlyExtensionKeysPassTheGate: a capability that is not an extension
// key (agent_api.run, explicit cancel, a backend's own non-key capability)
// or a backend key it advertises but does not declare in Keys fails closed
// as unsupported, before any value is looked at.
func TestOnlyExtensionKeysPassTheGate(t *testing.T) {
	for _, k := range []string{agent.CapRun, agent.CapEvents, agent.CapCancel, agent.CapToolsStructured, "backend.toy.flag"} {
		caps := agent.NewCapabilities(agent.CapRun, agent.CapEvents, agent.CapCancel, agent.CapToolsStructured, "backend.toy.flag")
		_, err := agent.Prepare(pk, caps, req(k, `{"x":1}`), agent.Defaults{})
		wantErr(t, err, agent.ErrUnsupportedCapability, "unsupported capability for toy: "+k)
	}
	if _, err := agent.Prepare(pk, agent.NewCapabilities("backend.toy.flag"), req("backend.toy.flag", `1`), toyKeys); err != nil {
		t.Fatalf("a declared, advertised key: %v", err)
	}
	// Declared but not advertised: still refused.
	_, err := agent.Prepare(pk, agent.NewCapabilities(agent.CapRun), req("backend.toy.flag", `1`), toyKeys)
	wantErr(t, err, agent.ErrUnsupportedCapability, "unsupported capability for toy: backend.toy.flag")
}
