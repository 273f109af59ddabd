package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"testing"

	"github.com/contextos/contextos/transport/internal/netguard"
)

func TestProblem(t *testing.T) {
	for _, c := range []struct {
		addr         string
		allowPrivate bool
		refused      bool
	}{
		{"93.184.216.34", false, false},
		{"2606:2800:220:1:248:1893:25c8:1946", false, false},
		{"169.254.169.254", true, true},
		{"::ffff:169.254.169.254", true, true},
		{"64:ff9b::a9fe:a9fe", true, true}, // NAT64 of the metadata address
		{"fe80::1", true, true},
		{"fd00:ec2::254", true, true},
		{"100.100.100.200", true, true},
		{"192.0.0.192", true, true},
		{"168.63.129.16", true, true},
		{"0.0.0.0", true, true},
		{"0.1.2.3", true, true},
		{"::", true, true},
		{"224.0.0.1", true, true},
		{"255.255.255.255", true, true},
		{"127.0.0.1", false, true},
		{"127.0.0.1", true, false},
		{"::1", false, true},
		{"10.1.2.3", false, true},
		{"10.1.2.3", true, false},
		{"100.64.0.1", false, true},
		{"fd12:3456::1", false, true},
		{"64:ff9b::a00:1", false, true}, // NAT64 of 10.0.0.1
	} {
		if got := netguard.Problem(netip.MustParseAddr(c.addr), c.allowPrivate) != ""; got != c.refused {
			t.Errorf("%s (allow_private %v): refused %v, want %v", c.addr, c.allowPrivate, got, c.refused)
		}
	}
}

// TestDialChecksEveryResolvedAddress: a name that resolves to a refused
// address (alone or beside an allowed one) is refused before any
// connection; an allowed one is dialled by address.
func TestDialChecksEveryResolvedAddress(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	answer := []netip.Addr{}
	old := netguard.Lookup
	netguard.Lookup = func(context.Context, string) ([]netip.Addr, error) { return answer, nil }
	defer func() { netguard.Lookup = old }()

	dial := func(allowPrivate bool, addrs ...string) error {
		answer = answer[:0]
		for _, a := range addrs {
			answer = append(answer, netip.MustParseAddr(a))
		}
		c, err := netguard.Dial(allowPrivate)(context.Background(), "tcp", net.JoinHostPort("tools.example.test", port))
		if err == nil {
			c.Close()
		}
		return err
	}
	var re *netguard.RefusedError
	if err := dial(true, "169.254.169.254"); !errors.As(err, &re) || re.Addr.String() != "169.254.169.254" {
		t.Errorf("metadata: %v", err)
	}
	if err := dial(true, "127.0.0.1", "169.254.169.254"); !errors.As(err, &re) {
		t.Errorf("mixed: %v", err)
	}
	if err := dial(false, "127.0.0.1"); !errors.As(err, &re) {
		t.Errorf("loopback without allow_private: %v", err)
	}
	if err := dial(true, "127.0.0.1"); err != nil {
		t.Errorf("loopback with allow_private: %v", err)
	}
	if err := dial(true); err == nil {
		t.Error("a name with no address dialled")
	}
}

// Origin: spellings of one server (a trailing-dot host, the scheme's
// default port, case) are one origin, so a same-origin rule (redirects,
// the MCP transport's auth headers) sees through them; another port,
// scheme or host is another origin.
func TestOrigin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"https://tools.example.com/x", "https://tools.example.com:443/y", true},
		{"https://tools.example.com/x", "https://TOOLS.example.com./y", true},
		{"https://tools.example.com./x", "https://tools.example.com.:443/", true},
		{"http://tools.example.com/x", "http://tools.example.com:80/x", true},
		{"http://[::1]/x", "http://[::1]:80/x", true},
		{"https://tools.example.com/x", "https://tools.example.com:8443/x", false},
		{"https://tools.example.com/x", "http://tools.example.com:443/x", false},
		{"https://tools.example.com/x", "https://tools.example.com.evil.com/x", false},
		{"https://tools.example.com/x", "https://tools.example.com../x", false},
		{"https://tools.example.com:443/x", "https://tools.example.com:0443/x", false},
	} {
		ua, _ := url.Parse(c.a)
		ub, _ := url.Parse(c.b)
		if got := netguard.Origin(ua) == netguard.Origin(ub); got != c.same {
			t.Errorf("%s and %s: same origin %v, want %v (%s, %s)", c.a, c.b, got, c.same, netguard.Origin(ua), netguard.Origin(ub))
		}
	}
}
