package agent

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// RunRequest is one run's request. Config defaults of the backend fill
// what it leaves out; what it sets wins.
type RunRequest struct {
	// Prompt must not be empty after trimming.
	Prompt string
	// WorkingDir is the agent's working directory; "" means the backend's
	// default. A relative path is relative to this process's working
	// directory when the run starts.
	WorkingDir string
	// Timeout bounds the run. nil means the backend's default; an explicit
	// zero means no timeout.
	Timeout *time.Duration
	// Env is laid over the backend's configured env (request keys win) and
	// applies only to the spawned process; this process's environment is
	// never changed.
	Env map[string]string
	// Extensions are namespaced options (agent_api.… or
	// backend.<kind>.…) with JSON values. Every key must be a capability
	// the backend advertises, else the run is refused before anything is
	// spawned (ErrUnsupportedCapability, naming the smallest such key).
	Extensions map[string]json.RawMessage
}

// Timeout returns a pointer to d, for RunRequest.Timeout.
func Timeout(d time.Duration) *time.Duration { return &d }

// Defaults are a backend's configured defaults for Prepare.
type Defaults struct {
	WorkingDir string
	// Timeout is used when the request has none (nil or 0: no timeout).
	Timeout time.Duration
	Env     map[string]string
	// Keys are the backend's own extension keys (backend.<kind>.… keys,
	// and any agent_api.… key Prepare does not know). Each must also be
	// advertised. The universal keys Prepare knows are extension keys
	// when advertised; any other key — a capability that is not an
	// extension key (agent_api.run, agent_api.control.cancel.v1, …)
	// included — is refused with ErrUnsupportedCapability.
	Keys []string
	// CheckValue validates the value of each of Keys the request gives,
	// in sorted key order, after the universal values. A nil CheckValue
	// accepts any JSON value.
	CheckValue func(key string, value json.RawMessage) error
	// CheckRequest checks the backend's cross-key rules, after the
	// universal ones.
	CheckRequest func(p *Prepared) error
}

// SessionSelector selects a session to resume or fork: the last one in
// the working directory, or one by id.
type SessionSelector struct {
	Last bool
	ID   string
}

// Prepared is a request that passed validation, with the defaults
// applied: what a backend maps to its process.
type Prepared struct {
	Prompt string
	// WorkingDir is the effective, absolute working directory ("" when
	// neither the request nor the defaults name one).
	WorkingDir string
	// Timeout is the effective timeout; 0 means none.
	Timeout time.Duration
	// Env is the configured env with the request's laid over it.
	Env map[string]string
	// NonInteractive is agent_api.exec.non_interactive (default true);
	// NonInteractiveSet says the request gave it.
	NonInteractive, NonInteractiveSet bool
	// Model is the trimmed agent_api.config.model.v1 ("" = backend default).
	Model string
	// AddDirs are agent_api.exec.add_dirs.v1's directories: absolute,
	// cleaned, existing, first occurrences only.
	AddDirs []string
	// Resume and Fork are the session selectors (at most one is set).
	Resume, Fork *SessionSelector
	// ExternalSandbox is agent_api.exec.external_sandbox.v1.
	ExternalSandbox bool
	// Extensions are all of the request's extensions (a copy).
	Extensions map[string]json.RawMessage
}

// Prepare validates req for a backend of kind with capabilities caps, in
// the contract's order, before anything is spawned: the prompt; the
// extension-key gate (each key's syntax and namespace, then its presence in
// caps, keys taken in sorted order so the smallest unsupported key is the
// one reported); the values; the cross-key rules. It returns the request
// with d applied.
func Prepare(kind Kind, caps Capabilities, req RunRequest, d Defaults) (*Prepared, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, InvalidRequest("prompt must not be empty")
	}
	keys := slices.Sorted(maps.Keys(req.Extensions))
	for _, k := range keys {
		if !validExtensionKey(kind, k) || !caps.Contains(k) || !(universalKeys[k] || slices.Contains(d.Keys, k)) {
			return nil, unsupported(kind, k)
		}
	}
	if strings.IndexByte(req.Prompt, 0) >= 0 || !utf8.ValidString(req.Prompt) {
		return nil, InvalidRequest("prompt must be UTF-8 text without NUL bytes")
	}
	p := &Prepared{Prompt: req.Prompt, NonInteractive: true}
	if req.Extensions != nil {
		// A copy: the caller may reuse the request's map and values.
		p.Extensions = make(map[string]json.RawMessage, len(req.Extensions))
		for k, v := range req.Extensions {
			p.Extensions[k] = bytes.Clone(v)
		}
	}

	// Working dir, timeout and env.
	wd := req.WorkingDir
	if wd == "" {
		wd = d.WorkingDir
	}
	if wd != "" {
		if strings.IndexByte(wd, 0) >= 0 {
			return nil, InvalidRequest("working dir must not contain NUL bytes")
		}
		abs, err := filepath.Abs(wd)
		if err != nil {
			return nil, InvalidRequest("working dir cannot be resolved")
		}
		p.WorkingDir = abs
	}
	switch {
	case req.Timeout != nil && *req.Timeout < 0:
		return nil, InvalidRequest("timeout must not be negative")
	case req.Timeout != nil:
		p.Timeout = *req.Timeout
	case d.Timeout > 0:
		p.Timeout = d.Timeout
	}
	p.Env = make(map[string]string, len(d.Env)+len(req.Env))
	for _, env := range []map[string]string{d.Env, req.Env} {
		for _, k := range slices.Sorted(maps.Keys(env)) {
			if !validEnvName(k) {
				return nil, InvalidRequest("env names must be non-empty, without '=' or NUL bytes")
			}
			if strings.IndexByte(env[k], 0) >= 0 {
				return nil, InvalidRequest("env values must not contain NUL bytes")
			}
			p.Env[k] = env[k]
		}
	}

	// Values, in sorted key order.
	for _, k := range keys {
		raw := bytes.TrimSpace(req.Extensions[k])
		if !json.Valid(raw) {
			return nil, InvalidRequest("invalid " + k)
		}
		var err error
		switch k {
		case CapNonInteractive:
			p.NonInteractive, err = boolValue(raw, k)
			p.NonInteractiveSet = true
		case CapExternalSandbox:
			p.ExternalSandbox, err = boolValue(raw, k)
		case CapModel:
			p.Model, err = modelValue(raw)
		case CapAddDirs:
			p.AddDirs, err = addDirsValue(raw, p.WorkingDir)
		case CapSessionResume:
			p.Resume, err = selectorValue(raw, k)
		case CapSessionFork:
			p.Fork, err = selectorValue(raw, k)
		default:
			if d.CheckValue != nil {
				err = d.CheckValue(k, raw)
			}
		}
		if err != nil {
			return nil, err
		}
	}

	// Cross-key rules.
	if p.Resume != nil && p.Fork != nil {
		return nil, InvalidRequest(CapSessionResume + " and " + CapSessionFork + " are mutually exclusive")
	}
	if p.ExternalSandbox {
		if p.NonInteractiveSet && !p.NonInteractive {
			return nil, InvalidRequest(CapExternalSandbox + " requires " + CapNonInteractive)
		}
		prefix := "backend." + string(kind) + ".exec."
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				return nil, InvalidRequest(CapExternalSandbox + " cannot be combined with " + prefix + "* keys")
			}
		}
	}
	if d.CheckRequest != nil {
		if err := d.CheckRequest(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// universalKeys are the agent_api.… extension keys Prepare validates.
var universalKeys = map[string]bool{
	CapNonInteractive: true, CapExternalSandbox: true, CapModel: true,
	CapAddDirs: true, CapSessionResume: true, CapSessionFork: true,
}

// validExtensionKey checks a key's syntax (^[a-z][a-z0-9_.-]*$, with a
// dot) and namespace (agent_api.… or backend.<kind>.…).
func validExtensionKey(kind Kind, k string) bool {
	if k == "" || k[0] < 'a' || k[0] > 'z' || !strings.Contains(k, ".") {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return strings.HasPrefix(k, "agent_api.") || strings.HasPrefix(k, "backend."+string(kind)+".")
}

func validEnvName(k string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00")
}

func boolValue(raw json.RawMessage, key string) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, InvalidRequest("invalid " + key)
}

// maxModelBytes bounds agent_api.config.model.v1.
const maxModelBytes = 128

func modelValue(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", InvalidRequest("invalid " + CapModel)
	}
	s = strings.TrimSpace(s)
	// A leading '-' would read as a flag on a CLI's command line.
	if s == "" || len(s) > maxModelBytes || strings.ContainsFunc(s, unicode.IsControl) || strings.HasPrefix(s, "-") {
		return "", InvalidRequest("invalid " + CapModel)
	}
	return s, nil
}

// Bounds of agent_api.exec.add_dirs.v1.
const (
	maxAddDirs     = 16
	maxAddDirBytes = 1024
)

func addDirsValue(raw json.RawMessage, wd string) ([]string, error) {
	root := InvalidRequest("invalid " + CapAddDirs)
	var obj map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &obj) != nil {
		return nil, root
	}
	dirsRaw, ok := obj["dirs"]
	if !ok || len(obj) != 1 {
		return nil, root
	}
	listErr := InvalidRequest("invalid " + CapAddDirs + ".dirs")
	var items []json.RawMessage
	if len(dirsRaw) == 0 || dirsRaw[0] != '[' || json.Unmarshal(dirsRaw, &items) != nil {
		return nil, listErr
	}
	if len(items) == 0 || len(items) > maxAddDirs {
		return nil, listErr
	}
	var out []string
	seen := map[string]bool{}
	for i, item := range items {
		itemErr := InvalidRequest("invalid " + CapAddDirs + ".dirs[" + strconv.Itoa(i) + "]")
		var s string
		if len(item) == 0 || item[0] != '"' || json.Unmarshal(item, &s) != nil {
			return nil, itemErr
		}
		s = strings.TrimFunc(s, unicode.IsSpace)
		if s == "" || len(s) > maxAddDirBytes || strings.IndexByte(s, 0) >= 0 {
			return nil, itemErr
		}
		if !filepath.IsAbs(s) {
			if wd == "" {
				return nil, itemErr
			}
			s = filepath.Join(wd, s)
		}
		s = filepath.Clean(s)
		if fi, err := os.Stat(s); err != nil || !fi.IsDir() {
			return nil, itemErr
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// maxSessionIDBytes bounds a session id.
const maxSessionIDBytes = 1024

func selectorValue(raw json.RawMessage, key string) (*SessionSelector, error) {
	bad := InvalidRequest("invalid " + key)
	var obj map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &obj) != nil {
		return nil, bad
	}
	var sel string
	if json.Unmarshal(obj["selector"], &sel) != nil {
		return nil, bad
	}
	idRaw, hasID := obj["id"]
	switch sel {
	case "last":
		if hasID || len(obj) != 1 {
			return nil, bad
		}
		return &SessionSelector{Last: true}, nil
	case "id":
		var id string
		if !hasID || len(obj) != 2 || json.Unmarshal(idRaw, &id) != nil {
			return nil, bad
		}
		id = strings.TrimSpace(id)
		if id == "" || len(id) > maxSessionIDBytes || strings.ContainsFunc(id, unicode.IsControl) || strings.HasPrefix(id, "-") {
			return nil, bad
		}
		return &SessionSelector{ID: id}, nil
	}
	return nil, bad
}

func toValidUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
