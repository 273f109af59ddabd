package runcontext

import (
	"regexp"
	"strings"
	"testing"
)

// The patterns isID, agentURNVersion and isRequestID's fast path read by
// hand: the tests below hold each to its pattern.
var (
	idPattern       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@/-]*$`)
	agentURNPattern = regexp.MustCompile(`^agent:([a-z0-9][a-z0-9._-]*)/([a-z0-9][a-z0-9._-]*)@([^@/]+)$`)
)

var grammarSeeds = []string{
	"", "a", "A", "0", "_", "-a", "a_b.c:d@e/f-g", "a b", "a\n", "a\x00", "usr_771", "ord_881",
	"é", "aé", "a\xff", "req_9f3a12", "req_acme/4711", "req_a/./b", "req_a/../b", "req_a/.x", "req_a/..x",
	"req_a//b", "req_", "9f3a12-ab:cd.ef_", strings.Repeat("a", 128), strings.Repeat("a", 129), "a" + strings.Repeat("b", 200) + "/",
	"agent:contextos/support-refund@1.2.0", "agent:ns/slug@v", "agent:ns/slug@", "agent:ns/slug", "agent:/slug@1",
	"agent:ns/@1", "agent:Ns/slug@1", "agent:ns/sLug@1", "agent:ns/slug@1@2", "agent:ns/slug@1/2", "agent:ns/a/b@1",
	"agent:n.s/s_l-ug@1.0.0-rc.1+b", "agent:ns/slug@1\n", "agent:ns/slug@\xff", "agent:ns/slug@é", "agent:-ns/slug@1",
	"agent:ns/.slug@1", "agent:ns@x/slug@1", "agentx:ns/slug@1", "Agent:ns/slug@1", "agent:ns/slug@ 1",
}

func checkGrammars(t *testing.T, s string) {
	if got, want := isID(s), idPattern.MatchString(s); got != want {
		t.Fatalf("isID(%q) = %v, idPattern says %v", s, got, want)
	}
	if got, want := isRequestID(s), requestIDPattern.MatchString(s); got != want {
		t.Fatalf("isRequestID(%q) = %v, requestIDPattern says %v", s, got, want)
	}
	m := agentURNPattern.FindStringSubmatch(s)
	v, ok := agentURNVersion(s)
	if ok != (m != nil) || ok && v != m[3] {
		t.Fatalf("agentURNVersion(%q) = %q, %v; agentURNPattern finds %q", s, v, ok, m)
	}
}

// TestGrammarsMatchPatterns holds the hand-written matchers to the
// patterns on ids and URNs at and around every edge of their grammars.
func TestGrammarsMatchPatterns(t *testing.T) {
	for _, s := range grammarSeeds {
		checkGrammars(t, s)
	}
	// Every byte in every position of a valid id, request id and URN.
	for _, base := range []string{"ab_1", "req_a/b", "agent:ns/slug@1.2.0"} {
		for i := 0; i <= len(base); i++ {
			for c := 0; c < 256; c++ {
				checkGrammars(t, base[:i]+string([]byte{byte(c)})+base[i:])
				if i < len(base) {
					checkGrammars(t, base[:i]+string([]byte{byte(c)})+base[i+1:])
				}
			}
		}
	}
}

func FuzzGrammarsMatchPatterns(f *testing.F) {
	for _, s := range grammarSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkGrammars(t, s) })
}
