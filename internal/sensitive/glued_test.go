package sensitive

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Realistic key bodies (made up, of each vendor's length and alphabet).
const (
	openAIKey    = "sk-proj-Xw3Pq9Lm2Vt7Kd1Rb8Ny4Hc6Jf0Gs5Ae2Uz9Oi3Lk7Mn1Bv4Cx8Qw6Er0Ty5"
	anthropicKey = "sk-ant-api03-Zr4Wq8Np2Ls6Kd0Fh3Jb7Vc1Mx5Gt9Ye4Ua8Io2Pe6Rn0Sk3Dl7Hq1Bw5-Xv9Cz2AA"
	slackToken   = "xoxb-2816523419-6073184527913-Qm7Rn2Xk9Lw4Tp8Vz3Jc6Hd"
)

// A vendor key glued to a name by '_' ("e_sk-proj-…") is a key: it is
// found and redacted, and the name before it stays.
func TestRedactGluedKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"e_" + openAIKey, "e_[REDACTED]"},
		{"x_" + ghToken, "x_[REDACTED]"},
		{"token_" + slackToken + " sent", "token_[REDACTED] sent"},
		{"key=abc_" + anthropicKey, "key=abc_[REDACTED]"},
		{"aws_" + awsKey + ".", "aws_[REDACTED]."},
		{"google_AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "google_[REDACTED]"},
		{"ci_github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "ci_[REDACTED]"},
		{"gl_glpat-Ab3De5Gh7Jk9Mn1Pq3St", "gl_[REDACTED]"},
		{"pay_sk_live_51HyQ2mAbCdEfGhIjKlMn", "pay_[REDACTED]"},
		{"pay_rk_test_51HyQ2mAbCdEfGhIjKlMn", "pay_[REDACTED]"},
		{"reg_npm_abcdefghijklmnopqrstuvwxyz0123456789", "reg_[REDACTED]"},
		{"mail_SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", "mail_[REDACTED]"},
		{"session_" + jwt, "session_[REDACTED]"},
		{"__" + openAIKey + "__", "__[REDACTED]"},
		{`{"note":"use e_` + openAIKey + `"}`, `{"note":"use e_[REDACTED]"}`},
	} {
		got, changed := Redact(c.in, All)
		if got != c.want || !changed {
			t.Errorf("Redact(%q) = %q, %v; want %q", c.in, got, changed, c.want)
		}
		if f, ok := Detect(c.in, Secrets); !ok || f.Kind != APIKey {
			t.Errorf("Detect(%q) = %v, %v; want an API key", c.in, f, ok)
		}
	}
}

// Glue is '_' (or any byte that is not a letter or digit), never a letter
// or digit; and a glued prefix is a key only with its body: ordinary
// names stay.
func TestGluedKeyPrefixesNeedTheirBody(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"risk-assessment-report-2024", "task-proj-management-board", "disk-usage-monitor-v2", "desk_sk-short",
		"mask_live_preview_enabled", "task_test_suite_runner_long", "ask_test_AbCdEfGhIjKlMnOp", "gh_pages_branch_name",
		"x_ghp_short", "highp_abcdefghijklmnopqrstuvwxyz0123456789", "thoughts_high_light", "box_xox-game",
		"npm_config_cache_directory", "go_AKIAnotakey", "pre_eyJhbGciOi", "my_sk-", "x_AKIAIOSFODNN7EXAMPLE_suffix",
		"misk-proj-Xw3Pq9Lm2Vt7Kd1Rb8Ny4", "2sk-proj-Xw3Pq9Lm2Vt7Kd1Rb8Ny4", "tokenghp_abcdefghijklmnopqrstuvwxyz0123456789",
	} {
		if got, changed := Redact(s, All); changed {
			t.Errorf("Redact(%q) = %q; want it unchanged", s, got)
		}
	}
}

// refAPIKeys are the key formats as regular expressions, as they were
// before glued keys were found (a key after a word boundary only).
var refAPIKeys = []*regexp.Regexp{
	regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`),
	regexp.MustCompile(`\bASIA[0-9A-Z]{16}\b`),
	regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`),
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`),
	regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,}`),
	regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`),
	regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`),
	regexp.MustCompile(`\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}`),
	regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{10,}`),
	regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}\b`),
	regexp.MustCompile(`\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}`),
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`),
}

// The key formats match as their regular expressions did, and more only
// after '_': on generated text made of the formats' pieces, the keys each
// format finds that follow no '_' are exactly the regexp's matches.
func TestKeyFormatsMatchTheirRegexps(t *testing.T) {
	t.Parallel()
	if len(refAPIKeys) != len(apiKeys) {
		t.Fatalf("%d reference formats, %d formats", len(refAPIKeys), len(apiKeys))
	}
	pieces := []string{"sk-", "sk_", "rk_", "live_", "test_", "k_", "gh", "p_", "o_", "github_pat_", "glpat-", "xox", "b-", "AKIA", "ASIA",
		"AIza", "npm_", "SG.", "eyJ", ".", ".eyJ", "_", "-", " ", "=", "é", "x", "Z", "9", "abcdefgh", "ABCDEFGHIJKLMNOP", "0123456789", "_-_-"}
	r := rand.New(rand.NewPCG(7, 37))
	var b strings.Builder
	for n := range 40000 {
		b.Reset()
		for range 2 + r.IntN(24) {
			p := pieces[r.IntN(len(pieces))]
			if r.IntN(4) == 0 {
				p = strings.Repeat(p, 2+r.IntN(12))
			}
			b.WriteString(p)
		}
		s := b.String()
		if n%3 == 0 { // a key-shaped run
			s += pieces[r.IntN(len(pieces))] + strings.Repeat("Ab1", r.IntN(20))
		}
		for k, re := range refAPIKeys {
			var plain, glued [][2]int
			for _, sp := range findAPIKey(s, k, nil, false) {
				if sp.start > 0 && s[sp.start-1] == '_' {
					glued = append(glued, [2]int{sp.start, sp.end})
				} else {
					plain = append(plain, [2]int{sp.start, sp.end})
				}
			}
			var want [][2]int
			for _, m := range re.FindAllStringIndex(s, -1) {
				want = append(want, [2]int{m[0], m[1]})
			}
			if !slices.Equal(plain, want) {
				t.Fatalf("format %d on %q: %v after a boundary (and %v glued), regexp %v", k, s, plain, glued, want)
			}
			if n := len(findAPIKey(s, k, nil, true)); n != min(1, len(plain)+len(glued)) {
				t.Fatalf("format %d on %q: first finds %d", k, s, n)
			}
		}
	}
}

// The key scan is linear: a mebibyte of key prefixes that never complete
// (a JSON Web Token's first segment with no second, glued or not, keys
// in keys) is scanned in well under the time a scan reading the rest of
// the text again from each prefix would take (minutes).
func TestKeyScanIsLinear(t *testing.T) {
	t.Parallel()
	const n = 1 << 20
	for name, s := range map[string]string{
		"jwt heads":           strings.Repeat("eyJ-", n/4),
		"glued jwt heads":     strings.Repeat("_eyJ", n/4),
		"jwt second segments": "eyJhbGciOi.eyJ" + strings.Repeat("eyJ-", n/4),
		"keys in keys":        strings.Repeat("_sk-", n/4),
		"github tokens":       "ghp_" + strings.Repeat("ghp0", n/4) + "_",
		"aws keys":            strings.Repeat("AKIA", n/4),
	} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			Redact(s, Of(APIKey))
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: redacting %d bytes takes over 20s", name, len(s))
		}
	}
}
