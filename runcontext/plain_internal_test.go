package runcontext

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// randomText returns n random strings over alphabet, from the seeds
// mutated (a byte replaced, inserted or removed) and from nothing.
func randomText(r *rand.Rand, seeds []string, alphabet string, n int) []string {
	out := append([]string(nil), seeds...)
	for len(out) < n {
		var s []byte
		if r.IntN(4) > 0 {
			s = []byte(seeds[r.IntN(len(seeds))])
		} else {
			for range r.IntN(24) {
				s = append(s, alphabet[r.IntN(len(alphabet))])
			}
		}
		for range 1 + r.IntN(3) {
			c := alphabet[r.IntN(len(alphabet))]
			switch i := r.IntN(len(s) + 1); r.IntN(3) {
			case 0:
				if i < len(s) {
					s[i] = c
				}
			case 1:
				s = append(s[:i], append([]byte{c}, s[i:]...)...)
			default:
				if i < len(s) {
					s = append(s[:i], s[i+1:]...)
				}
			}
		}
		out = append(out, string(s))
	}
	return out
}

// TestPlainSemverOnlyWhatStrictAccepts: every version plainSemver passes,
// semver.StrictNewVersion accepts; and it passes the usual ones.
func TestPlainSemverOnlyWhatStrictAccepts(t *testing.T) {
	seeds := []string{"1.2.0", "0.0.0", "10.20.30", "1.2", "1.2.3.4", "01.2.3", "1.02.3", "1.2.03", "1.2.3-rc.1", "1.2.3+b",
		"18446744073709551615.0.0", "18446744073709551616.0.0", "9999999999999999999.1.1", "99999999999999999999.1.1", "", ".", "..", "1..2", "v1.2.3"}
	r := rand.New(rand.NewPCG(1, 2))
	passed := 0
	for _, v := range randomText(r, seeds, "0123456789.-+av", 20000) {
		if !plainSemver(v) {
			continue
		}
		passed++
		if _, err := semver.StrictNewVersion(v); err != nil {
			t.Errorf("plainSemver(%q) but StrictNewVersion: %v", v, err)
		}
	}
	for _, v := range []string{"1.2.0", "0.0.0", "10.20.30", "9999999999999999999.1.1"} {
		if !plainSemver(v) {
			t.Errorf("plainSemver(%q) = false", v)
		}
	}
	if passed < 100 {
		t.Errorf("only %d random versions were plain", passed)
	}
}

// TestPlainSPIFFEOnlyWhatParseAccepts: every id plainSPIFFE passes,
// checkSPIFFE's url.Parse reading accepts too; and it passes the usual
// ones.
func TestPlainSPIFFEOnlyWhatParseAccepts(t *testing.T) {
	seeds := []string{"spiffe://contextos/agents/support", "spiffe://acme.prod/ns/agents/sa/support", "spiffe://a_b-c.d/x/Y.z-_",
		"spiffe://contextos", "spiffe://contextos/", "spiffe://contextos//a", "spiffe://contextos/a/../b", "spiffe://contextos/./b",
		"spiffe://ContextOS/a", "spiffe://contextos:8443/a", "spiffe://u:p@contextos/a", "spiffe://contextos/a?x=1", "spiffe://contextos/a#f",
		"spiffe://contextos/a%2Fb", "spiffe:contextos/a", "SPIFFE://contextos/a", "https://contextos/a", "spiffe:///a", "spiffe://[::1]/a",
		"spiffe://contextos/" + strings.Repeat("a", 2040)}
	r := rand.New(rand.NewPCG(3, 4))
	passed := 0
	for _, id := range randomText(r, seeds, "spiffe:/.-_aZ09@?#%[]~ \x00\xff", 40000) {
		if !plainSPIFFE(id) {
			continue
		}
		passed++
		var ps problems
		checkSPIFFEParsed(&ps, &at{name: "agent.workload_identity"}, id)
		if len(ps.list) > 0 {
			t.Errorf("plainSPIFFE(%q) but checkSPIFFE: %v", id, ps.list)
		}
	}
	for _, id := range seeds[:3] {
		if !plainSPIFFE(id) {
			t.Errorf("plainSPIFFE(%q) = false", id)
		}
	}
	if passed < 100 {
		t.Errorf("only %d random ids were plain", passed)
	}
}

// TestPlainTraceparentOnlyWhatParseAccepts: every traceparent
// plainTraceparent passes for a trace id, ParseTraceparent accepts with
// that trace id; and it passes the usual ones.
func TestPlainTraceparentOnlyWhatParseAccepts(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	seeds := []string{"00-" + id + "-00f067aa0ba902b7-01", "00-" + id + "-00f067aa0ba902b7-00", "00-" + id + "-00f067aa0ba902b7-03",
		"00-" + id + "-00f067aa0ba902b7-04", "00-" + id + "-00f067aa0ba902b7-0f", "01-" + id + "-00f067aa0ba902b7-01",
		"ff-" + id + "-00f067aa0ba902b7-01", "00-" + id + "-0000000000000000-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-" + strings.ToUpper(id) + "-00f067aa0ba902b7-01", "00-" + id + "-00F067AA0BA902B7-01", "00-" + id + "-00f067aa0ba902b7-01-x",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	r := rand.New(rand.NewPCG(5, 6))
	passed := 0
	for _, tp := range randomText(r, seeds, "0123456789abcdefABF-x", 40000) {
		for _, traceID := range []string{id, strings.Repeat("0", 32), "0af7651916cd43dd8448eb211c80319c", strings.ToUpper(id)} {
			if !plainTraceparent(tp, traceID) {
				continue
			}
			passed++
			if tr, err := ParseTraceparent(tp); err != nil || tr.TraceID != traceID {
				t.Errorf("plainTraceparent(%q, %q) but ParseTraceparent: %+v, %v", tp, traceID, tr, err)
			}
		}
	}
	for _, tp := range seeds[:3] {
		if !plainTraceparent(tp, id) {
			t.Errorf("plainTraceparent(%q) = false", tp)
		}
	}
	if passed < 100 {
		t.Errorf("only %d random traceparents were plain", passed)
	}
}
