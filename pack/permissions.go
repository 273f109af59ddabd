package pack

import (
	"net/url"
	"path"
	"strings"
)

// EffectivePermissions resolves the permission that governs each
// capability ("adapter_id.capability") of p: a capability is exposed only
// by a permission that allows it, and an explicit deny (a permission with
// allow false naming the capability, or "*" on its adapter) wins over any
// allow, wherever the two appear. When several permissions allow the same
// capability (Validate refuses that), the first governs. The result holds
// only the exposed capabilities.
func EffectivePermissions(p *Pack) map[string]Permission {
	perms := p.ToolingLayer.Permissions
	denied := make(map[string]bool)
	for _, q := range perms {
		if !q.Allow {
			denied[q.CapabilityID()] = true
		}
	}
	out := make(map[string]Permission, len(perms))
	for _, q := range perms {
		id := q.CapabilityID()
		if !q.Allow || denied[id] || denied[q.AdapterID+".*"] {
			continue
		}
		if _, seen := out[id]; !seen {
			out[id] = q
		}
	}
	return out
}

// sharedEndpoints refuses one endpoint reached through adapters of
// different approval modes: a read-only alias of a write endpoint would
// reach it with no gate and no idempotency key.
func (v *validator) sharedEndpoints() {
	first := map[string]int{}
	adapters := v.p.ToolingLayer.AdapterRegistry
	for i, a := range adapters {
		if a.EndpointRef == "" {
			continue
		}
		key := endpointKey(a.EndpointRef)
		j, seen := first[key]
		if !seen {
			first[key] = i
			continue
		}
		if b := adapters[j]; b.ApprovalMode != a.ApprovalMode {
			v.add(GateRisk, CodeSharedEndpoint, idx("tooling_layer.adapter_registry", i)+".endpoint_ref",
				"adapter %s (%s) reaches the endpoint of adapter %s (%s); adapters sharing an endpoint must declare the same approval mode", a.AdapterID, a.ApprovalMode, b.AdapterID, b.ApprovalMode)
		}
	}
}

// endpointKey normalizes an endpoint reference so spellings of one
// endpoint compare equal: scheme and host case, percent-encoding, dot
// segments and trailing slashes do not matter.
func endpointKey(ref string) string {
	if plainEndpoint(ref) {
		return ref
	}
	u, err := url.Parse(strings.TrimSpace(ref))
	if err != nil {
		return strings.ToLower(ref)
	}
	host, p := u.Host, u.Path
	if u.Opaque != "" { // "internal:payments" names what "internal://payments" does
		host, p, _ = strings.Cut(strings.TrimLeft(u.Opaque, "/"), "/")
	}
	if p != "" {
		p = path.Clean("/" + p)
	}
	return strings.ToLower(u.Scheme + "://" + host + strings.TrimRight(p, "/"))
}

// plainEndpoint reports a reference already in the form endpointKey
// returns: scheme://host[/path], lower case, no escapes, no dot segments,
// no trailing slash.
func plainEndpoint(ref string) bool {
	scheme, rest, ok := strings.Cut(ref, "://")
	if !ok || scheme == "" || rest == "" || strings.HasSuffix(rest, "/") || strings.Contains(rest, "/.") || strings.Contains(rest, "//") {
		return false
	}
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/' || c == ':') {
			return false
		}
	}
	return !strings.ContainsAny(scheme, "/.")
}
