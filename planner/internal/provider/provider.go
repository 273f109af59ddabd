// Package errtext decides what of a provider's error reply a model planner
// may repeat in its own errors, which the runtime logs: only identifier
// words (an error type, code or request id), never free text, which a
// hostile or careless server can fill with a key it was sent.
package errtext

// Word returns s when it is an identifier word of at most limit bytes
// (ASCII letters, digits and underscores; with lower set, no capitals),
// else "". An API key never passes: every provider's keys hold a '-'.
func Word(s string, limit int, lower bool) string {
	if s == "" || len(s) > limit {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		case c >= 'A' && c <= 'Z' && !lower:
		default:
			return ""
		}
	}
	return s
}
