// Package netguard owns the network destinations a tool call may reach:
// which IP addresses are never a tool (link-local and cloud metadata,
// unspecified, multicast, broadcast) or only with the host's allowance
// (loopback and private ranges), and a dialer that applies that rule to the
// address it actually connects to, so a host name that resolves (or is
// rebound) to a forbidden address is refused at dial time, on every
// redirect hop and every reconnection.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// metadata are cloud metadata and platform addresses outside the
// link-local ranges: AWS IPv6 (fd00:ec2::254), Alibaba (100.100.100.200),
// Oracle (192.0.0.192) and Azure's wire server (168.63.129.16).
var metadata = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("192.0.0.192"), netip.MustParseAddr("168.63.129.16"),
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	broadcast   = netip.MustParseAddr("255.255.255.255")
)

// Problem says why a tool call must not reach ip ("" when it may): link-local
// and metadata addresses, unspecified, "this network", multicast and broadcast
// addresses never; loopback, private (RFC 1918, ULA) and shared (RFC 6598)
// addresses only when allowPrivate. An IPv4 address mapped into IPv6 or
// NAT64 is judged as the IPv4 address it carries.
func Problem(ip netip.Addr, allowPrivate bool) string {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case ip.IsUnspecified() || thisNetwork.Contains(ip):
		return "unspecified"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || isMetadata(ip):
		return "link-local or cloud metadata (never a tool)"
	case ip.IsMulticast() || ip == broadcast:
		return "multicast or broadcast"
	case (ip.IsLoopback() || ip.IsPrivate() || sharedSpace.Contains(ip)) && !allowPrivate:
		return "loopback or private (set allow_private to call it)"
	}
	return ""
}

func isMetadata(ip netip.Addr) bool {
	for _, m := range metadata {
		if ip == m {
			return true
		}
	}
	return false
}

// RefusedError is a dial the rule refused. Its text names the address
// class, not the host name.
type RefusedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s %s is %s", ErrorPrefix, e.Addr, e.Reason)
}

// ErrorPrefix starts every RefusedError's text (for callers, like gRPC,
// that get the text without the error).
const ErrorPrefix = "netguard: refused address"

// Lookup resolves host names for Dial. Tests replace it to play a
// resolver that answers differently from one lookup to the next.
var Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Dial returns a DialContext that resolves the host itself, refuses the
// connection when any address it resolves to is forbidden (a name that
// mixes a public and a metadata address is hostile), and connects to the
// checked addresses in order, by address, so no second resolution can
// swap them.
func Dial(allowPrivate bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip}
		} else if ips, err = Lookup(ctx, host); err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, errors.New("netguard: the host resolves to no address")
		}
		for _, ip := range ips {
			if p := Problem(ip, allowPrivate); p != "" {
				return nil, &RefusedError{Addr: ip.Unmap(), Reason: p}
			}
		}
		var first error
		for _, ip := range ips {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
			if err == nil {
				return c, nil
			}
			if first == nil {
				first = err
			}
			if ctx.Err() != nil {
				break
			}
		}
		return nil, first
	}
}

// MaxResponseHeaderBytes bounds a tool's response headers.
const MaxResponseHeaderBytes = 1 << 20

var transports [2]func() *http.Transport

func init() {
	for i := range transports {
		allow := i == 1
		transports[i] = sync.OnceValue(func() *http.Transport {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.Proxy = nil // a proxy would resolve the name where the rule cannot see it
			t.DialContext = Dial(allow)
			t.MaxResponseHeaderBytes = MaxResponseHeaderBytes
			return t
		})
	}
}

// Transport is the shared HTTP transport whose dials follow the rule:
// http.DefaultTransport's settings, no proxy, the checked dialer, response
// headers bounded. One per allowance, so a connection opened under
// allow_private is never reused by a call without it.
func Transport(allowPrivate bool) *http.Transport {
	if allowPrivate {
		return transports[1]()
	}
	return transports[0]()
}

// Origin is u's scheme://host:port with the scheme's default port made
// explicit and the host lower-cased (an IPv6 host in brackets): two URLs
// with the same Origin reach the same server, so credentials sent to one
// may go to the other.
func Origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + ":" + port
}
