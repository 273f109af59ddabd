package transport

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// CheckEndpoint refuses endpoints a tool call must never reach: a scheme
// other than http or https (grpc and grpcs for gRPC), a URL with
// credentials, and literal addresses that are link-local (cloud metadata
// among them) or unspecified. Loopback and private (RFC 1918, ULA)
// addresses are refused unless allowPrivate. Host names are not resolved.
func CheckEndpoint(raw string, allowPrivate bool, schemes ...string) (*url.URL, error) {
	if len(schemes) == 0 {
		schemes = []string{"http", "https"}
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: endpoint must be an absolute URL", ErrConfig)
	}
	ok := false
	for _, s := range schemes {
		ok = ok || strings.EqualFold(u.Scheme, s)
	}
	if !ok {
		return nil, fmt.Errorf("%w: endpoint scheme %q is not one of %s", ErrConfig, clip(u.Scheme), strings.Join(schemes, ", "))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: endpoint must not carry credentials; use auth", ErrConfig)
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") && !allowPrivate {
		return nil, fmt.Errorf("%w: endpoint host localhost is loopback (set allow_private to call it)", ErrConfig)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		switch {
		case ip.IsUnspecified():
			return nil, fmt.Errorf("%w: endpoint address %s is unspecified", ErrConfig, ip)
		case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip == netip.MustParseAddr("fd00:ec2::254"):
			return nil, fmt.Errorf("%w: endpoint address %s is link-local (cloud metadata is never a tool)", ErrConfig, ip)
		case (ip.IsLoopback() || ip.IsPrivate()) && !allowPrivate:
			return nil, fmt.Errorf("%w: endpoint address %s is loopback or private (set allow_private to call it)", ErrConfig, ip)
		}
	}
	return u, nil
}
