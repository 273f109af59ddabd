package pack

import (
	"net/url"
	"path"
	"slices"
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
// segments and trailing slashes do not matter, nor does a trailing dot on
// the host (payments. is the absolute form of payments) or a port that
// does not choose another server: any port on a registry reference (it
// names a service, not a socket) and the scheme's default port on http
// (80) and https (443). The key only ever makes references compare equal
// that might reach one endpoint, so a spelling cannot hide an alias; it
// reaches nothing itself.
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
	scheme := strings.ToLower(u.Scheme)
	return scheme + "://" + endpointHost(scheme, host) + strings.ToLower(strings.TrimRight(p, "/"))
}

// endpointHost is the host[:port] of an endpoint reference as endpointKey
// compares it: lower case, without trailing dots, and without a port that
// does not choose another server.
func endpointHost(scheme, hostport string) string {
	host, port := hostport, ""
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && !strings.Contains(hostport[i:], "]") {
		host, port = hostport[:i], hostport[i+1:]
	}
	host = strings.TrimRight(strings.ToLower(host), ".")
	switch {
	case port == "", slices.Contains(registrySchemes(), scheme), scheme == "http" && port == "80", scheme == "https" && port == "443":
		return host
	}
	return host + ":" + port
}

// plainEndpoint reports a reference already in the form endpointKey
// returns: scheme://host[/path], lower case, no escapes, no dot segments,
// no trailing slash, no port and no trailing dot on the host.
func plainEndpoint(ref string) bool {
	scheme, rest, ok := strings.Cut(ref, "://")
	if !ok || scheme == "" || rest == "" || strings.HasSuffix(rest, "/") || strings.Contains(rest, "/.") || strings.Contains(rest, "//") {
		return false
	}
	if host, _, _ := strings.Cut(rest, "/"); strings.Contains(host, ":") || strings.HasSuffix(host, ".") {
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
