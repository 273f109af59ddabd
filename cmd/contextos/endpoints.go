package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/packview"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
	"github.com/contextos/contextos/transport/mcptransport"
)

// endpointEntry is one entry of the --endpoints file: how an adapter's
// endpoint_ref is reached.
type endpointEntry struct {
	Transport      string          `json:"transport"`
	URL            string          `json:"url,omitempty"`
	Command        []string        `json:"command,omitempty"`
	Auth           *transport.Auth `json:"auth,omitempty"`
	TimeoutMS      int64           `json:"timeout_ms,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	BackoffMS      int64           `json:"backoff_ms,omitempty"`
	MaxBackoffMS   int64           `json:"max_backoff_ms,omitempty"`
	Jitter         string          `json:"jitter,omitempty"`
	JitterSeed     uint64          `json:"jitter_seed,omitempty"`
	PollIntervalMS int64           `json:"poll_interval_ms,omitempty"`
	// MaxRedirects lets the endpoint follow up to this many redirects,
	// each within its own origin (transport.Options.MaxRedirects).
	// Default 0: a redirect is an error.
	MaxRedirects int `json:"max_redirects,omitempty"`
	// AllowPrivate defaults to true here: the endpoints file is the
	// operator's own configuration (staging tools on loopback or a private
	// network); set it to false to refuse such addresses.
	AllowPrivate *bool  `json:"allow_private,omitempty"`
	Namespace    string `json:"namespace,omitempty"`
	Agent        string `json:"agent,omitempty"`
	// InputRaw sends the arguments only in input_raw, as JSON text, for
	// envelope servers whose input is a string map (transport.Endpoint.InputRaw).
	InputRaw bool `json:"input_raw,omitempty"`
	// Tools declares, per capability name, the tool.name sent for it
	// (name; default the capability id) and its labels and risk level,
	// which are checked against the adapter's approval mode.
	Tools map[string]transport.ToolInfo `json:"tools,omitempty"`
}

func (e endpointEntry) endpoint() transport.Endpoint {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	ep := transport.Endpoint{Transport: e.Transport, URL: e.URL, Command: e.Command, Auth: e.Auth, Timeout: ms(e.TimeoutMS), AllowPrivate: e.AllowPrivate == nil || *e.AllowPrivate,
		PollInterval: ms(e.PollIntervalMS), Namespace: e.Namespace, Agent: e.Agent, Tools: e.Tools, InputRaw: e.InputRaw,
		Retry: transport.Retry{MaxAttempts: e.MaxAttempts, Backoff: ms(e.BackoffMS), MaxBackoff: ms(e.MaxBackoffMS), Jitter: transport.Jitter(e.Jitter), Seed: e.JitterSeed}}
	if ep.Transport == "webhook-callback" {
		ep.Transport = transport.TransportWebhook
	}
	return ep
}

// liveAdapters builds the adapters whose endpoint_ref has an entry in the
// endpoints file. close releases them (MCP subprocesses, gRPC
// connections).
type liveAdapters struct {
	adapters map[string]gateway.Adapter    // adapter id → adapter
	caps     map[string]gateway.Capability // adapter id → capability settings
	schemas  map[string]map[string]gateway.Capability
	closers  []io.Closer
}

func (l *liveAdapters) close() {
	for _, c := range slices.Backward(l.closers) {
		c.Close()
	}
}

// readSecrets reads the --secrets file: a secret name to its value, or
// to an object of keys (client_id, client_secret, …).
func readSecrets(data []byte) (transport.MapSecrets, error) {
	var raw map[string]json.RawMessage
	if err := strictJSON(data, &raw); err != nil {
		return nil, err
	}
	out := transport.MapSecrets{}
	for name, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			out[name] = s
			continue
		}
		var keys map[string]string
		if err := json.Unmarshal(v, &keys); err != nil {
			return nil, fmt.Errorf("secret %q must be a string or an object of strings", name)
		}
		for k, kv := range keys {
			out[name+":"+k] = kv
		}
	}
	return out, nil
}

func newLiveAdapters(ctx context.Context, packs []*pack.Pack, entries map[string]endpointEntry, secrets transport.SecretResolver) (*liveAdapters, error) {
	l := &liveAdapters{adapters: map[string]gateway.Adapter{}, caps: map[string]gateway.Capability{}, schemas: map[string]map[string]gateway.Capability{}}
	used := map[string]bool{}
	// One OAuth2 token cache for every adapter of the run (an adapter given
	// none keeps its own).
	opts := transport.Options{Secrets: secrets, Tokens: &transport.TokenCache{}}
	for _, p := range packs {
		perms := packview.EffectivePermissions(p)
		for _, a := range p.ToolingLayer.AdapterRegistry {
			e, ok := entries[a.EndpointRef]
			if !ok || l.adapters[a.AdapterID] != nil {
				continue
			}
			used[a.EndpointRef] = true
			ep := e.endpoint()
			opts := opts
			opts.MaxRedirects = e.MaxRedirects
			var err error
			for name, info := range ep.Tools {
				if !slices.Contains(a.Capabilities, name) {
					err = fmt.Errorf("%w: tools names %q, which adapter %s does not have", transport.ErrConfig, name, a.AdapterID)
				} else if cerr := transport.CheckToolInfo(a.AdapterID+"."+name, info, perms[a.AdapterID+"."+name].Mode(a)); cerr != nil {
					err = cerr
				}
				if err != nil {
					l.close()
					return nil, fmt.Errorf("endpoint %s: %w", a.EndpointRef, err)
				}
			}
			if err := distinctToolNames(a, ep.Tools); err != nil {
				l.close()
				return nil, fmt.Errorf("endpoint %s: %w", a.EndpointRef, err)
			}
			switch ep.Transport {
			case transport.TransportGRPC:
				var g *grpctransport.Adapter
				u, _ := url.Parse(ep.URL)
				g, err = grpctransport.New(ep, &grpctransport.Options{Options: opts, Plaintext: u != nil && strings.EqualFold(u.Scheme, "grpc")})
				if err == nil {
					l.adapters[a.AdapterID], l.caps[a.AdapterID] = g, g.Capability()
					l.closers = append(l.closers, g)
				}
			case transport.TransportMCP:
				var m *mcptransport.Adapter
				m, err = mcptransport.Connect(ctx, ep, &mcptransport.Options{Options: opts})
				if err == nil {
					l.closers = append(l.closers, m)
					var caps map[string]gateway.Capability
					if caps, err = m.Capabilities(); err == nil {
						l.adapters[a.AdapterID], l.schemas[a.AdapterID] = m, caps
					}
				}
			default:
				var h *transport.Adapter
				h, err = transport.NewAdapter(ep, &opts)
				if err == nil {
					l.adapters[a.AdapterID], l.caps[a.AdapterID] = h, h.Capability()
				}
			}
			if err != nil {
				l.close()
				return nil, fmt.Errorf("endpoint %s (adapter %s): %w", a.EndpointRef, a.AdapterID, err)
			}
		}
	}
	for ref := range entries {
		if !used[ref] {
			l.close()
			return nil, fmt.Errorf("endpoint %s is not the endpoint_ref of any adapter in the packs", ref)
		}
	}
	return l, nil
}

// distinctToolNames refuses tools names that would send two of a's
// capabilities to one tool: a name that is another capability's name, or
// another's default (its capability id). The transports refuse two equal
// names; only here are the adapter's capabilities known.
func distinctToolNames(a pack.Adapter, tools map[string]transport.ToolInfo) error {
	owner := map[string]string{}
	for _, c := range a.Capabilities {
		name := a.AdapterID + "." + c
		if n := tools[c].Name; n != "" {
			name = n
		}
		if other, ok := owner[name]; ok {
			return &transport.ConfigError{Field: "tools." + c + ".name", Problem: fmt.Sprintf("sends capability %s to the tool capability %s is sent to (%q); each capability needs its own tool", c, other, name)}
		}
		owner[name] = c
	}
	return nil
}

// capability is the settings of one capability of a live adapter (nil
// when the adapter is scripted).
func (l *liveAdapters) capability(adapterID, capability string) (gateway.Capability, bool) {
	if l == nil {
		return gateway.Capability{}, false
	}
	if caps, ok := l.schemas[adapterID]; ok {
		c, ok := caps[capability]
		return c, ok
	}
	c, ok := l.caps[adapterID]
	return c, ok
}
