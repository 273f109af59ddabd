package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/runcontext"
)

// Secrets are redacted where they enter a run, whatever redaction rules
// its packs name: the built-in secret detectors (API keys and tokens,
// bearer and basic credentials, private keys, secrets in key=value text
// and URLs, base64-wrapped secrets, and the values of secret-named
// members such as api_key) run over what a caller and a planner write
// freely, before the compiler, policy, the model, a checkpoint, a packet
// or a record sees it. What they redact becomes sensitive.Redacted, so a
// resume and a replay see exactly what the run saw. Tool results are
// redacted by the gateway, which applies the same detectors to every run;
// token references are refused at validation when they hold a token.

// withoutSecrets returns req and rc with secrets redacted from what a
// caller writes freely: the input's message, channel and context, the user's
// additional claims, the run context's metadata, the extension members
// of both, and the tracestate and baggage of each's trace context. The identity claim, token references and ids are left alone
// (validation refuses a token where a reference belongs). Neither input
// is changed; each is returned as given when it holds no secret.
func withoutSecrets(req *runcontext.InvokeRequest, rc *runcontext.RunContext) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	if req != nil {
		msg, cm := sensitive.Redact(req.Input.Message, sensitive.Secrets)
		channel, ch := sensitive.Redact(req.Input.Channel, sensitive.Secrets)
		ctxv, cc := redactMap(req.Input.Context)
		claims, cu := redactRaw(req.User.Claims)
		ext, ce := redactRaw(req.Extensions)
		state, cs := redactTraceState(req.Trace.TraceState)
		bag, cb := redactBaggage(req.Trace.Baggage)
		if cm || ch || cc || cu || ce || cs || cb {
			c := *req
			c.Input.Message, c.Input.Channel, c.Input.Context, c.User.Claims, c.Extensions = msg, channel, ctxv, claims, ext
			c.Trace.TraceState, c.Trace.Baggage = state, bag
			req = &c
		}
	}
	if rc != nil {
		meta, cm := redactMap(rc.Metadata)
		claims, cu := redactRaw(rc.User.Claims)
		ext, ce := redactRaw(rc.Extensions)
		var tc *runcontext.TraceContext
		if rc.TraceContext != nil {
			state, cs := redactTraceState(rc.TraceContext.TraceState)
			bag, cb := redactBaggage(rc.TraceContext.Baggage)
			if cs || cb {
				tc = &runcontext.TraceContext{TraceParent: rc.TraceContext.TraceParent, TraceState: state, Baggage: bag}
			}
		}
		if cm || cu || ce || tc != nil {
			c := *rc
			c.Metadata, c.User.Claims, c.Extensions = meta, claims, ext
			if tc != nil {
				c.TraceContext = tc
			}
			rc = &c
		}
	}
	return req, rc
}

// redactTraceState and redactBaggage redact the secrets of a W3C
// tracestate or baggage header (redactTraceList). The traceparent — the
// trace and span ids and flags — is never touched, so the run's spans and
// its tools' calls still join the caller's trace, and honest members pass
// on byte for byte.
func redactTraceState(s string) (string, bool) {
	return redactTraceList(s, false, func(s string) bool {
		_, err := trace.ParseTraceState(s)
		return err == nil
	})
}

func redactBaggage(s string) (string, bool) {
	return redactTraceList(s, true, func(s string) bool {
		_, err := baggage.Parse(s)
		return err == nil
	})
}

// redactTraceList redacts the secrets of a W3C list header: each
// comma-separated member is a key=value pair (in baggage, with
// ;-separated key=value properties). A pair whose key is secret-named
// (sensitive.IsSecretKey: api_key, token, ...) or whose value, as written
// or percent-decoded, holds a secret the built-in detectors find keeps
// its key and gets sensitive.Redacted for a value, which both grammars
// accept; every other member is kept as written. When the redacted header
// no longer parses (valid; the marker can make a member or the header
// longer than its limit), the members that held a secret are dropped
// instead. A trace header is passed on as it came (a caller forwards an
// upstream's), so a secret in it is redacted rather than refused.
func redactTraceList(s string, props bool, valid func(string) bool) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, false
	}
	members := strings.Split(s, ",")
	secret := make([]bool, len(members))
	hit := false
	for i, m := range members {
		parts := []string{m}
		if props {
			parts = strings.Split(m, ";")
		}
		for k, p := range parts {
			key, val, ok := strings.Cut(p, "=")
			if !ok || strings.TrimSpace(val) == sensitive.Redacted || !secretPair(strings.TrimSpace(key), strings.TrimSpace(val)) {
				continue
			}
			parts[k] = key + "=" + sensitive.Redacted
			secret[i], hit = true, true
		}
		if secret[i] {
			members[i] = strings.Join(parts, ";")
		}
	}
	if !hit {
		return s, false
	}
	if out := strings.Join(members, ","); valid(out) {
		return out, true
	}
	kept := members[:0]
	for i, m := range members {
		if !secret[i] {
			kept = append(kept, m)
		}
	}
	return strings.Join(kept, ","), true
}

// secretPair reports whether a trace header's key=value pair holds a
// secret: a secret-named key, or a value in which the built-in detectors
// find one, as written or percent-decoded.
func secretPair(key, val string) bool {
	if sensitive.IsSecretKey(key) {
		return true
	}
	_, found := sensitive.DetectEscaped(val, sensitive.Secrets)
	return found
}

// redactPlan returns p with secrets redacted from what a planner writes
// freely: its steps' arguments, evidence refs and idempotency keys, its
// decision's outputs, rationale, subject ids and evidence refs, its memory
// proposals' content, subject ids and evidence refs, and its replan
// reason. The plan is returned
// as given when it holds no secret; otherwise a copy (the planner's plan
// is not changed).
func redactPlan(p *Plan) *Plan {
	var c *Plan
	own := func() *Plan {
		if c == nil {
			cp := *p
			cp.Steps = slices.Clone(p.Steps)
			cp.Memory = slices.Clone(p.Memory)
			if p.Decision != nil {
				d := *p.Decision
				cp.Decision = &d
			}
			c = &cp
		}
		return c
	}
	for i, s := range p.Steps {
		if args, ch := redactMap(s.Args); ch {
			own().Steps[i].Args = args
		}
		if refs, ch := redactList(s.EvidenceRefs); ch {
			own().Steps[i].EvidenceRefs = refs
		}
		if key, ch := sensitive.Redact(s.IdempotencyKey, sensitive.Secrets); ch {
			own().Steps[i].IdempotencyKey = key
		}
		if id, ch := sensitive.Redact(s.CapabilityID, sensitive.Secrets); ch {
			own().Steps[i].CapabilityID = id
		}
		if atts, ch := redactList(s.Attachments); ch {
			own().Steps[i].Attachments = atts
		}
	}
	if d := p.Decision; d != nil {
		if key, ch := sensitive.Redact(d.DecisionKey, sensitive.Secrets); ch {
			own().Decision.DecisionKey = key
		}
		if out, ch := sensitive.Redact(d.Outcome, sensitive.Secrets); ch {
			own().Decision.Outcome = out
		}
		if out, ch := redactMap(d.Outputs); ch {
			own().Decision.Outputs = out
		}
		if why, ch := sensitive.Redact(d.Rationale, sensitive.Secrets); ch {
			own().Decision.Rationale = why
		}
		if ids, ch := redactList(d.SubjectIDs); ch {
			own().Decision.SubjectIDs = ids
		}
		if refs, ch := redactList(d.EvidenceRefs); ch {
			own().Decision.EvidenceRefs = refs
		}
	}
	for i, m := range p.Memory {
		if wc, ch := sensitive.Redact(m.WriteClass, sensitive.Secrets); ch {
			own().Memory[i].WriteClass = wc
		}
		if content, ch := sensitive.Redact(m.Content, sensitive.Secrets); ch {
			own().Memory[i].Content = content
		}
		if ids, ch := redactList(m.SubjectIDs); ch {
			own().Memory[i].SubjectIDs = ids
		}
		if refs, ch := redactList(m.EvidenceRefs); ch {
			own().Memory[i].EvidenceRefs = refs
		}
	}
	if why, ch := sensitive.Redact(p.Replan, sensitive.Secrets); ch {
		own().Replan = why
	}
	if c == nil {
		return p
	}
	return c
}

// redactList redacts the secrets of a list of strings (a copy when any).
func redactList(l []string) ([]string, bool) {
	var out []string
	for i, v := range l {
		if r, ch := sensitive.Redact(v, sensitive.Secrets); ch {
			if out == nil {
				out = slices.Clone(l)
			}
			out[i] = r
		}
	}
	if out == nil {
		return l, false
	}
	return out, true
}

// redactMap redacts the secrets of a JSON-shaped map (a copy when any).
func redactMap(m map[string]any) (map[string]any, bool) {
	if len(m) == 0 {
		return m, false
	}
	v, changed := sensitive.RedactSecrets(m)
	if !changed {
		return m, false
	}
	return v.(map[string]any), true
}

// redactRaw redacts the secrets of raw JSON members (a copy when any):
// each member is read, redacted as a member of an object (so a
// secret-named member loses its value) and written again.
func redactRaw(m map[string]json.RawMessage) (map[string]json.RawMessage, bool) {
	if len(m) == 0 {
		return m, false
	}
	doc := make(map[string]any, len(m))
	for k, raw := range m {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			// Not JSON (a caller built the map by hand): kept as a string.
			v = string(raw)
		}
		doc[k] = v
	}
	red, changed := sensitive.RedactSecrets(doc)
	if !changed {
		return m, false
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range red.(map[string]any) {
		b, err := json.Marshal(v)
		if err != nil {
			b = json.RawMessage(`"` + sensitive.Redacted + `"`)
		}
		out[k] = b
	}
	return out, true
}

// logWords is an error's text as the runtime logs it: the words of a
// plug-in, a store or an upstream (a planner's provider error, a host
// critic's, a tool's), with every built-in rule applied, personal data
// as well as secrets, as an approver's reason is kept (denialReason).
// The log handler then applies the secret detectors to every line.
func logWords(err error) string {
	s, _ := sensitive.Redact(err.Error(), sensitive.All)
	return s
}

// secretFreeHandler is the runtime's log handler: every message and
// attribute it passes on has had the built-in secret detectors applied
// (an error text, a planner's or a store's words), and the values of
// secret-named attributes are redacted whole.
type secretFreeHandler struct{ h slog.Handler }

// withoutSecretsLogger wraps l's handler in a secretFreeHandler.
func withoutSecretsLogger(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(secretFreeHandler); ok {
		return l
	}
	return slog.New(secretFreeHandler{l.Handler()})
}

func (s secretFreeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return s.h.Enabled(ctx, l)
}

func (s secretFreeHandler) Handle(ctx context.Context, r slog.Record) error {
	msg, changed := sensitive.Redact(r.Message, sensitive.Secrets)
	r.Attrs(func(a slog.Attr) bool {
		_, c := redactAttr(a)
		changed = changed || c
		return !changed
	})
	if !changed {
		return s.h.Handle(ctx, r) // the common line: passed on as it is
	}
	out := slog.NewRecord(r.Time, r.Level, msg, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		red, _ := redactAttr(a)
		out.AddAttrs(red)
		return true
	})
	return s.h.Handle(ctx, out)
}

func (s secretFreeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i], _ = redactAttr(a)
	}
	return secretFreeHandler{s.h.WithAttrs(red)}
}

func (s secretFreeHandler) WithGroup(name string) slog.Handler {
	return secretFreeHandler{s.h.WithGroup(name)}
}

// redactAttr redacts one attribute: a string (or a value written as one:
// an error, a Stringer, anything else) through the secret detectors, a
// group member by member, and a secret-named attribute whole. It reports
// whether anything changed.
func redactAttr(a slog.Attr) (slog.Attr, bool) {
	v := a.Value.Resolve()
	if sensitive.IsSecretKey(a.Key) && !v.Equal(slog.StringValue("")) && !v.Equal(slog.StringValue(sensitive.Redacted)) && v.Kind() != slog.KindGroup {
		return slog.String(a.Key, sensitive.Redacted), true
	}
	switch v.Kind() {
	case slog.KindString:
		if s, ch := sensitive.Redact(v.String(), sensitive.Secrets); ch {
			return slog.String(a.Key, s), true
		}
	case slog.KindGroup:
		g, changed := v.Group(), false
		for i := range g {
			red, ch := redactAttr(g[i])
			if !ch {
				continue
			}
			if !changed {
				g, changed = slices.Clone(g), true // the caller's group is not written
			}
			g[i] = red
		}
		if changed {
			return slog.Attr{Key: a.Key, Value: slog.GroupValue(g...)}, true
		}
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case map[string]any, []any:
			if red, ch := sensitive.RedactSecrets(x); ch {
				return slog.Any(a.Key, red), true
			}
			return a, false
		case error:
			text = x.Error()
		case fmt.Stringer:
			text = x.String()
		default:
			b, err := json.Marshal(x)
			if err != nil {
				text = fmt.Sprint(x)
			} else {
				text = string(b)
			}
		}
		if s, ch := sensitive.Redact(text, sensitive.Secrets); ch {
			return slog.String(a.Key, s), true
		}
	}
	return a, false
}
