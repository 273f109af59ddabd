package pack

import (
	"net/url"
	"path"
	"strings"
)

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
