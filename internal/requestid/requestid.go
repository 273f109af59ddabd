// Package requestid is the grammar of an invoke request's request_id,
// shared by runcontext's validation and the published invoke-agent.v1
// schema (schemas/internal/build).
package requestid

// MaxLegacyLen bounds a request_id in the legacy grammar ("req_" then
// letters, digits and _ . : @ / -), which checkpoints of paused runs and
// replay packets recorded by earlier releases may hold.
const MaxLegacyLen = 256

// Pattern is request_id's grammar as one regular expression (the
// invoke-agent.v1 schema's pattern; its maxLength is
// MaxLegacyLen): either the safe charset within runcontext.MaxRequestIDLen
// bytes, or the legacy "req_" grammar in which no "/"-separated segment
// is "." or "..".
const Pattern = `^(` + safeRequestID + `|` + legacyRequestID + `)$`

const (
	// safeRequestID: letters, digits and _ . : - (a UUID, a ULID,
	// "req_…"), starting with a letter or digit, at most runcontext.MaxRequestIDLen
	// bytes.
	safeRequestID = `[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}`
	// legacyRequestID: "req_", then idPattern's charset; every segment
	// after a "/" is empty or other than "." and "..".
	legacyRequestID = `req_[A-Za-z0-9_.:@-]*(/(` + legacySegment + `))*`
	legacySegment   = `|[A-Za-z0-9_:@-][A-Za-z0-9_.:@-]*|\.[A-Za-z0-9_:@-][A-Za-z0-9_.:@-]*|\.\.[A-Za-z0-9_.:@-]+`
)
