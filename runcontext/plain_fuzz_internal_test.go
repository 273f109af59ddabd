package runcontext

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/wire"
)

// FuzzPlainReadingsMatchParsers holds each reading validation does
// without its parser to the reading with it, both ways, problem for
// problem: a SPIFFE id (plainSPIFFE, then url.Parse), an agent URN's
// version (plainSemver, then semver.StrictNewVersion), a run context's
// traceparent (plainTraceparent, then ParseTraceparent), a token_ref's JWT
// shape (jwtShape against strings.Split) and a lazily written path (at
// against wire.Join and wire.Index). The references are the readings as
// they were before the plain ones.
func FuzzPlainReadingsMatchParsers(f *testing.F) {
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, s := range []string{
		"spiffe://contextos/agents/support", "spiffe://a_b-c.d/x/Y.z-_", "spiffe://ContextOS/a", "spiffe://contextos/a%2Fb", "spiffe://u@c/a",
		"spiffe://c:1/a", "spiffe://c//a", "spiffe://c/./a", "spiffe://c/../a", "spiffe://c/a:b", "spiffe://c/a@b", "SPIFFE://c/a", "spiffe://../a",
		"spiffe://c/" + strings.Repeat("a", 2037), "spiffe://c/" + strings.Repeat("a", 2038),
		"1.2.0", "0.0.0", "01.2.3", "1.2.3-rc.1", "1.2.3+b", "١.2.3", "1..2", ".1.2", "1.2.", "99999999999999999999.0.0", "18446744073709551615.0.0",
		"9999999999999999999.9999999999999999999.9999999999999999999",
		"00-" + tid + "-00f067aa0ba902b7-01", "00-" + tid + "-00f067aa0ba902b7-03", "00-" + tid + "-00f067aa0ba902b7-04", "ff-" + tid + "-00f067aa0ba902b7-01",
		"01-" + tid + "-00f067aa0ba902b7-01-x", "00-" + strings.ToUpper(tid) + "-00f067aa0ba902b7-01", "00-" + tid + "-00F067AA0BA902B7-01",
		"00-" + tid + "-0000000000000000-01", "00-" + tid + "-00f067aa0ba902b7-0a", "00-" + tid + "-00f067aa0ba902b7-01 ",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", " eyJhbGciOiJIUzI1NiJ9.a.b.c.d\t", "eyJhbGciOiJIUzI1NiJ9...", "tok_user_7a",
		"agent.principal_chain.12.kind", "a.3.b.10.c", "",
	} {
		f.Add(s, tid)
	}
	f.Add("00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00000000000000000000000000000000")
	f.Add("00-"+strings.ToUpper(tid)+"-00f067aa0ba902b7-01", strings.ToUpper(tid))
	base, err := DecodeRunContext(fixture.Read(f, "run-context.support.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s, traceID string) {
		// SPIFFE: checkSPIFFE reports what url.Parse's reading reports.
		if s != "" {
			var got, want problems
			checkSPIFFE(&got, &at{name: "agent.workload_identity"}, s)
			checkSPIFFEParsed(&want, &at{name: "agent.workload_identity"}, s)
			if fmt.Sprint(got.list) != fmt.Sprint(want.list) {
				t.Errorf("checkSPIFFE(%q) = %v, url.Parse's reading %v", s, got.list, want.list)
			}
		}
		// Agent URN: the version is checked as StrictNewVersion checks it.
		{
			urn := "agent:acme/support@" + s
			var got, want problems
			checkAgentURN(&got, &at{name: "agent.agent_urn"}, urn)
			if v, ok := agentURNVersion(urn); !ok || len(urn) > maxIDLen {
				want.add("agent.agent_urn", CodeFormat, "must have the form agent:<namespace>/<slug>@<semver> (lowercase namespace and slug)")
			} else if _, err := semver.StrictNewVersion(v); err != nil {
				want.add("agent.agent_urn", CodeFormat, "the version after @ is not a semantic version MAJOR.MINOR.PATCH")
			}
			if fmt.Sprint(got.list) != fmt.Sprint(want.list) {
				t.Errorf("checkAgentURN(%q) = %v, StrictNewVersion's reading %v", urn, got.list, want.list)
			}
		}
		// Traceparent: the run context's problems of it are the
		// propagator's.
		{
			rc := *base
			rc.TraceID = traceID
			rc.TraceContext = &TraceContext{TraceParent: s}
			var got []Problem
			if ve, ok := rc.Validate().(*ValidationError); ok {
				for _, p := range ve.Problems {
					if p.Path == "trace_context.traceparent" {
						got = append(got, p)
					}
				}
			}
			var want problems
			if tr, err := ParseTraceparent(s); err != nil {
				want.add("trace_context.traceparent", CodeFormat, "is not a valid W3C traceparent")
			} else if tr.TraceID != traceID {
				want.add("trace_context.traceparent", CodeConsistent, "trace id must equal trace_id")
			}
			if fmt.Sprint(got) != fmt.Sprint(want.list) {
				t.Errorf("traceparent %q of trace id %q: %v, ParseTraceparent's reading %v", s, traceID, got, want.list)
			}
		}
		// token_ref: jwtShape is the strings.Split reading.
		{
			parts := strings.Split(strings.TrimSpace(s), ".")
			want := false
			if len(parts) == 3 || len(parts) == 5 {
				h, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "="))
				want = err == nil && len(h) > 1 && h[0] == '{'
			}
			if got := jwtShape(s); got != want {
				t.Errorf("jwtShape(%q) = %v, strings.Split's reading %v", s, got, want)
			}
		}
		// Paths: s's dot-separated names, a number an array index, written
		// by at as wire.Join and wire.Index write them.
		{
			segs := strings.Split(s, ".")
			if len(segs) > 16 {
				segs = segs[:16]
			}
			p := &at{name: segs[0]}
			want := segs[0]
			for _, seg := range segs[1:] {
				var n int
				if _, err := fmt.Sscanf(seg, "%d", &n); err == nil && fmt.Sprint(n) == seg && n >= 0 {
					p, want = p.i(n), wire.Index(want, n)
				} else {
					p, want = p.m(seg), wire.Join(want, seg)
				}
			}
			if got := p.String(); got != want {
				t.Errorf("at(%q).String() = %q, wire writes %q", s, got, want)
			}
			var ps problems
			ps.addIn(p, "x", CodeFormat, "m")
			if got := ps.list[0].Path; got != wire.Join(want, "x") {
				t.Errorf("addIn path %q, wire writes %q", got, wire.Join(want, "x"))
			}
		}
	})
}
