package transport

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport/internal/netguard"
)

// checkEndpoint refuses endpoints a tool call must never reach: a scheme
// other than http or https (grpc and grpcs for gRPC), a URL with
// credentials, and literal addresses that are link-local (cloud metadata
// among them), unspecified, multicast or broadcast. Loopback, private (RFC
// 1918, ULA) and shared (RFC 6598) addresses, and the names localhost and
// *.localhost, are refused unless allowPrivate. Host names are not
// resolved here; the transports' dialer checks the address a name resolves
// to when it connects (see Options.HTTPClient).
func checkEndpoint(raw string, allowPrivate bool, schemes ...string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: endpoint must be an absolute URL", ErrConfig)
	}
	if p := urlProblem(u, allowPrivate, schemes...); p != "" {
		return nil, fmt.Errorf("%w: endpoint %s", ErrConfig, p)
	}
	return u, nil
}

// urlProblem says why u is not a place a call may go ("" when it is).
// The text never holds the URL's credentials, path or query.
func urlProblem(u *url.URL, allowPrivate bool, schemes ...string) string {
	if len(schemes) == 0 {
		schemes = []string{"http", "https"}
	}
	ok := false
	for _, s := range schemes {
		ok = ok || strings.EqualFold(u.Scheme, s)
	}
	if !ok {
		return fmt.Sprintf("scheme %q is not one of %s", clip(u.Scheme), strings.Join(schemes, ", "))
	}
	if u.User != nil {
		return "must not carry credentials; use auth"
	}
	if u.Host == "" {
		return "has no host"
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if (host == "localhost" || strings.HasSuffix(host, ".localhost")) && !allowPrivate {
		return "host localhost is loopback (set allow_private to call it)"
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if p := netguard.Problem(ip, allowPrivate); p != "" {
			return fmt.Sprintf("address %s is %s", ip.Unmap(), p)
		}
	}
	return ""
}

// checkTokenURL checks an OAuth2 token_url like an endpoint (see
// checkEndpoint), and more strictly, since the client secret travels to
// it: https only, except plain http to a loopback or private literal
// address or localhost when allowPrivate (a local token server in tests
// and staging). Errors match ErrConfig and never echo the URL.
func checkTokenURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: token_url must be an absolute URL", ErrConfig)
	}
	if p := urlProblem(u, allowPrivate); p != "" {
		return fmt.Errorf("%w: token_url %s", ErrConfig, p)
	}
	if strings.EqualFold(u.Scheme, "https") {
		return nil
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	local := host == "localhost" || strings.HasSuffix(host, ".localhost")
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		local = ip.IsLoopback() || ip.IsPrivate()
	}
	if !allowPrivate || !local {
		return fmt.Errorf("%w: token_url must be https (plain http only to a loopback or private address with allow_private)", ErrConfig)
	}
	return nil
}

// redirectError is a redirect the client refused to follow.
type redirectError struct{ why string }

func (e *redirectError) Error() string { return "redirect refused: " + e.why }

// checkRedirect is the redirect rule of every client the transports make:
// with maxHops 0 a redirect is not followed (the 3xx is the reply, and an
// error); otherwise at most maxHops are followed, each to the origin
// (scheme, host and port) of the first request only, so the credentials
// and the body, which go with every hop, never reach another host; and
// each hop passes the endpoint rules again.
func checkRedirect(maxHops int, allowPrivate bool) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if maxHops <= 0 {
			return http.ErrUseLastResponse
		}
		if len(via) > maxHops {
			return &redirectError{fmt.Sprintf("more than %d redirects", maxHops)}
		}
		if netguard.Origin(req.URL) != netguard.Origin(via[0].URL) {
			return &redirectError{"to another origin (" + clip(safeOrigin(req.URL)) + ")"}
		}
		if p := urlProblem(req.URL, allowPrivate); p != "" {
			return &redirectError{"the target " + p}
		}
		return nil
	}
}

// safeOrigin is u's scheme and host, for messages: never its
// credentials, path or query.
func safeOrigin(u *url.URL) string {
	if u.Host == "" {
		return u.Scheme + ":"
	}
	return u.Scheme + "://" + u.Host
}

// clientFor is the client an endpoint's calls use: the host's client (or
// a default one) with the redirect rule, and, when the host set no
// Transport of its own, the shared transport whose dialer refuses
// forbidden addresses on every connection.
func clientFor(hc *http.Client, maxHops int, allowPrivate bool) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	if c.Transport == nil {
		c.Transport = netguard.Transport(allowPrivate)
	}
	c.CheckRedirect = checkRedirect(maxHops, allowPrivate)
	return c
}

// refusal maps a client error that is a refused redirect or a refused
// address to its non-retryable ToolError (nil for other errors).
func refusal(err error, details map[string]any) *gateway.ToolError {
	var re *redirectError
	if errors.As(err, &re) {
		return newError(gateway.CodeExecutionFailed, false, "the tool endpoint redirected the call and the "+re.Error(), withDetail(details, "redirect", "refused"))
	}
	var ne *netguard.RefusedError
	if errors.As(err, &ne) {
		return newError(gateway.CodeExecutionFailed, false, "the tool endpoint resolves to an address calls may not reach: "+ne.Reason, withDetail(details, "address", ne.Addr.String()))
	}
	return nil
}

// redirectStatus is the error of a 3xx reply when redirects are not
// followed. It names the status, never the Location.
func redirectStatus(status int, details map[string]any) *gateway.ToolError {
	return newError(gateway.CodeExecutionFailed, false, fmt.Sprintf("the tool endpoint answered HTTP %d (a redirect); redirects are not followed", status),
		withDetail(withDetail(details, "http_status", status), "redirect", "not_followed"))
}

func withDetail(details map[string]any, k string, v any) map[string]any {
	d := make(map[string]any, len(details)+1)
	for dk, dv := range details {
		d[dk] = dv
	}
	d[k] = v
	return d
}
