// Package decisionhook holds what package decision lets the module's own
// packages set and nothing outside the module can. Package decision sets
// its functions when it is initialized: a package that imports decision
// finds them set.
package decisionhook

// OutputsRedacted marks in (a *decision.BuildInput) as one whose Outputs
// the built-in secret detectors have already redacted: they are what
// sensitive.RedactSecrets returned, and nothing changed them since.
// decision.Build then does not apply the detectors to them again, which
// would change nothing (redacting a redacted value again changes
// nothing); the rest of the record is redacted as always. The runtime
// marks the outputs of a plan's decision that it redacted itself, in the
// plan's copy only it holds. A BuildInput made outside the module is
// never marked.
var OutputsRedacted func(in any)
