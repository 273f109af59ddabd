package agent_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/agent"
)

// allowedMessage reports whether msg is one of the messages Prepare may
// return for r: fixed rule texts and the request's own (validated) keys,
// never a value.
func allowedMessage(msg string, r agent.RunRequest) bool {
	fixed := []string{
		"invalid request: prompt must not be empty",
		"invalid request: prompt must be UTF-8 text without NUL bytes",
		"invalid request: working dir must not contain NUL bytes",
		"invalid request: working dir cannot be resolved",
		"invalid request: timeout must not be negative",
		"invalid request: env names must be non-empty, without '=' or NUL bytes",
		"invalid request: env values must not contain NUL bytes",
		"invalid request: agent_api.session.resume.v1 and agent_api.session.fork.v1 are mutually exclusive",
		"invalid request: agent_api.exec.external_sandbox.v1 requires agent_api.exec.non_interactive",
		"invalid request: agent_api.exec.external_sandbox.v1 cannot be combined with backend.toy.exec.* keys",
		"invalid request: invalid agent_api.exec.add_dirs.v1.dirs",
		"unsupported capability for toy: <invalid>",
	}
	for _, f := range fixed {
		if msg == f {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(msg, "invalid request: invalid agent_api.exec.add_dirs.v1.dirs["); ok {
		n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		return err == nil && n >= 0 && n < 16 && strings.HasSuffix(rest, "]")
	}
	for k := range r.Extensions {
		if msg == "invalid request: invalid "+k || msg == "unsupported capability for toy: "+k {
			return allCaps.Contains(k) || strings.HasPrefix(msg, "unsupported")
		}
	}
	return false
}

// FuzzPrepare: Prepare never panics, and its errors are typed and never
// carry a value of the request.
func FuzzPrepare(f *testing.F) {
	f.Add("do it", []byte(`{"agent_api.config.model.v1":" m "}`), "A", "v", "", int64(0))
	f.Add("  ", []byte(`{"zz.unknown":1}`), "", "", "", int64(-1))
	f.Add("p", []byte(`{"agent_api.exec.add_dirs.v1":{"dirs":["/","a","/tmp/../"]}}`), "B", "x", "/tmp", int64(5))
	f.Add("p", []byte(`{"agent_api.session.resume.v1":{"selector":"id","id":"s"},"agent_api.session.fork.v1":{"selector":"last"}}`), "A=B", "", "rel", int64(1))
	f.Add("p", []byte(`{"agent_api.exec.external_sandbox.v1":true,"agent_api.exec.non_interactive":false,"backend.toy.exec.mode":"x"}`), "K", "\x00", "", int64(0))
	f.Add("p\x00", []byte(`{"Backend.Toy":1,"backend.codex.x":2}`), "K", "v", "a\x00", int64(1))
	f.Add("p", []byte(`not json`), "K", "v", "", int64(0))
	f.Fuzz(func(t *testing.T, prompt string, exts []byte, envKey, envVal, wd string, timeout int64) {
		r := agent.RunRequest{Prompt: prompt, WorkingDir: wd, Env: map[string]string{envKey: envVal}}
		if timeout != 0 {
			r.Timeout = agent.Timeout(time.Duration(timeout))
		}
		if err := json.Unmarshal(exts, &r.Extensions); err != nil {
			r.Extensions = map[string]json.RawMessage{"backend.toy.flag": exts}
		}
		d := agent.Defaults{
			Env:     map[string]string{"BASE": "1"},
			Timeout: time.Minute,
			CheckValue: func(k string, v json.RawMessage) error {
				if !json.Valid(v) {
					t.Fatalf("CheckValue(%q) got invalid JSON", k)
				}
				if v[0] != '"' {
					return agent.InvalidRequest("invalid " + k)
				}
				return nil
			},
		}
		p, err := agent.Prepare(pk, allCaps, r, d)
		if err != nil {
			if p != nil {
				t.Fatal("a prepared request with an error")
			}
			var ae *agent.Error
			if !errors.As(err, &ae) || !(errors.Is(err, agent.ErrInvalidRequest) || errors.Is(err, agent.ErrUnsupportedCapability)) {
				t.Fatalf("error %v (%T) is not InvalidRequest or UnsupportedCapability", err, err)
			}
			if !allowedMessage(err.Error(), r) {
				t.Fatalf("unexpected message %q", err.Error())
			}
			return
		}
		if strings.TrimSpace(p.Prompt) == "" || p.Prompt != prompt {
			t.Fatal("prompt changed or empty")
		}
		if p.Env[envKey] != envVal || (envKey != "BASE" && p.Env["BASE"] != "1") {
			t.Fatalf("env %v", p.Env)
		}
		if r.Timeout != nil && p.Timeout != *r.Timeout || r.Timeout == nil && p.Timeout != time.Minute {
			t.Fatalf("timeout %v", p.Timeout)
		}
		if p.Resume != nil && p.Fork != nil {
			t.Fatal("resume and fork")
		}
		if len(p.AddDirs) > 16 {
			t.Fatal("too many dirs")
		}
		if len(p.Extensions) != len(r.Extensions) {
			t.Fatal("extensions lost")
		}
	})
}
