package gateway

// RedactValue returns a redacted, JSON-shaped copy of v under rules, as
// the gateway redacts a tool's outcome: rules apply to every string and
// map key and to every number that could be a card number, the string
// values of secret-named members are redacted when the built-in "secret"
// rule is among rules, and v is not modified. It reports whether
// redaction changed anything. Hosts use it to show what the gateway never
// redacts itself, such as a paused call's arguments.
func RedactValue(v any, rules []Redactor) (any, bool) { return redactValue(v, rules) }
