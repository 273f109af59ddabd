package policy

import (
	"encoding/json"
	"strings"

	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/logic"
	"github.com/contextos/contextos/runcontext"
)

// Document is the policy data document: JSON-shaped values (maps, slices,
// strings, float64, bool, nil) keyed by the members of the data document
// (docs/policy.md). Build it with NewDocument; a Document is read-only during
// evaluation and may be shared.
type Document map[string]any

// NewDocument builds the data document of a run: request is the invoke
// input (intent, message, channel, locale, context), user the user claims
// (with role and additional claims), agent the agent identity, and the
// run's tenant, session, intent and safety mode.
func NewDocument(in runcontext.Input, rc *runcontext.RunContext) Document {
	req := map[string]any{"intent": in.Intent, "message": in.Message}
	if in.Channel != "" {
		req["channel"] = in.Channel
	}
	if in.Locale != "" {
		req["locale"] = in.Locale
	}
	ctx := map[string]any{}
	for k, v := range in.Context {
		ctx[k] = jsonv.Normalize(v)
	}
	req["context"] = ctx
	user := map[string]any{"user_id": rc.User.UserID}
	for k, raw := range rc.User.Claims {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			user[k] = v
		}
	}
	if rc.User.Role != "" {
		user["role"] = rc.User.Role
	}
	if rc.User.TenureDays != nil {
		user["tenure_days"] = float64(*rc.User.TenureDays)
	}
	if d := rc.User.Delegation; d != nil {
		scopes := make([]any, len(d.Scopes))
		for i, s := range d.Scopes {
			scopes[i] = s
		}
		user["delegation"] = map[string]any{"auth_type": string(d.AuthType), "scopes": scopes, "subject": d.Subject}
	}
	agent := map[string]any{"agent_urn": rc.Agent.AgentURN, "workload_identity": rc.Agent.WorkloadIdentity}
	if rc.Agent.AgentID != "" {
		agent["agent_id"] = rc.Agent.AgentID
	}
	if rc.Agent.Role != "" {
		agent["role"] = rc.Agent.Role
	}
	intent := rc.Intent
	if intent == "" {
		intent = in.Intent
	}
	doc := Document{
		"request":     req,
		"user":        user,
		"agent":       agent,
		"tenant_id":   rc.TenantID,
		"intent":      intent,
		"safety_mode": string(rc.SafetyMode),
	}
	if rc.SessionID != "" {
		doc["session_id"] = rc.SessionID
	}
	return doc
}

// WithTool returns a copy of d (sharing its members) with the tool member
// of a per-call evaluation at the gateway; mode is the mode the call is
// governed at (the gateway passes the capability's effective mode, or the
// requested one when higher).
func (d Document) WithTool(capabilityID string, args map[string]any, mode runcontext.ApprovalMode) Document {
	out := make(Document, len(d)+1)
	for k, v := range d {
		out[k] = v
	}
	a := make(map[string]any, len(args))
	for k, v := range args {
		a[k] = jsonv.Normalize(v)
	}
	out["tool"] = map[string]any{"capability_id": capabilityID, "args": a, "approval_mode": string(mode)}
	return out
}

// lookup resolves a dotted path ("request.context.refund_amount") as the
// JsonLogic evaluator does: every dot splits, and a canonical number
// indexes an array. The empty path is the whole document.
func (d Document) lookup(path string) (any, bool) {
	var cur any = map[string]any(d)
	if path == "" {
		return cur, true
	}
	// Every dot splits, as logic.Segments splits: "a." reads the member
	// "" of a, as the evaluator does.
	for {
		seg, rest, more := strings.Cut(path, ".")
		var ok bool
		if cur, ok = step(cur, seg); !ok {
			return nil, false
		}
		if !more {
			return cur, true
		}
		path = rest
	}
}

// signalsPath is where the request's guardrail labels are, split.
var signalsPath = splitPath("request.context.signals")

// lookupSegs is lookup of a path split by splitPath.
func (d Document) lookupSegs(segs []string) (any, bool) {
	var cur any = map[string]any(d)
	for _, seg := range segs {
		var ok bool
		if cur, ok = step(cur, seg); !ok {
			return nil, false
		}
	}
	return cur, true
}

// step is one segment of a lookup: a member of an object or an element
// of an array.
func step(cur any, seg string) (any, bool) {
	switch x := cur.(type) {
	case map[string]any:
		v, ok := x[seg]
		return v, ok
	case []any:
		// The evaluator's own reading of an index: "01" or "+1" is no
		// index there, so none here either.
		i, ok := logic.ArrayIndex(seg)
		if !ok || i >= len(x) {
			return nil, false
		}
		return x[i], true
	}
	return nil, false
}

// signals returns request.context.signals as strings (non-strings are
// ignored).
func (d Document) signals() []string {
	v, ok := d.lookupSegs(signalsPath)
	return appendSignals(nil, v, ok)
}

// appendSignals appends to dst the strings of v, the value of
// request.context.signals (ok: the document has it).
func appendSignals(dst []string, v any, ok bool) []string {
	if !ok {
		return dst
	}
	list, _ := v.([]any)
	for _, e := range list {
		if s, ok := e.(string); ok {
			dst = append(dst, s)
		}
	}
	return dst
}
