// Package pack owns the Context Pack, the unit of deployment of the
// Context plane: the ten-layer document (context-pack.v2) and its strict
// decoding, pinned refs (pack_id@MAJOR.MINOR.PATCH), the validation gates,
// content hashing and Ed25519 signing, compatibility checks, the Registry
// interface with in-memory and directory implementations, lifecycle
// states with recorded reviews and per-environment pins, a caching
// Resolver, environment overlays, and the version-class
// Diff.
//
// The nouns of this package: a Pack is the document; a Ref names one
// version of it; an Entry is a version stored in a Registry, with its
// State in the publishing lifecycle and the Signoffs of its review; a Pin
// is one entry of an environment's pin history; a Resolved pack is one the Resolver
// fetched, verified, validated and checked for a Use (execute, resume or replay);
// a Problem is one validation failure, and a ValidationError lists them;
// an Overlay constrains a pack for one environment, and AppliedOverlay
// records which one a view applied; a Class is the version class Diff
// assigns to a change.
//
// A runtime never executes governed work on a pack that is unpinned,
// unsigned, tampered, revoked, incompatible or structurally unsafe: each of
// those is refused with a sentinel error (ErrUnpinnedRef, ErrSignature,
// ErrNotUsable, ErrIncompatible, ErrInvalid).
//
// # Validation gates
//
// Validate runs the gates schema, referential, policy, risk, tenancy,
// security and evaluation (seed 003, "Validation gates") and reports every
// problem with its gate, a stable code, the JSON path and a message.
// Warnings reports, in the same form, what a valid pack is risky with: the
// risk gate's CodeCallerAssertedControl, an approval gate of a write-class
// capability whose controls read only caller-asserted request.context and
// nothing of the call's tool.args. A
// redaction rule that is neither built in (credit_card, pan, iban, email,
// phone, ssn, secret) nor named by the host (ValidateOptions.RedactionRules)
// is refused there (CodeUnknownRedactionRule), not when a run starts.
//
// A pack cannot be made to grant more than it says: among other things the
// gates refuse a write capability whose approval gate can never activate
// (its condition folds to a falsy constant), one endpoint reached through
// adapters of different approval modes, an allow next to an explicit deny
// of the same capability (a deny always wins),
// arg_constraints the gateway does not enforce, and a pack without a
// decision spec.
//
// # Publishing lifecycle
//
// A version moves draft → linted → reviewed → signed → published (seed
// 003, "Publishing lifecycle"). Reviewed needs a recorded Signoff —
// reviewer and role — in every role the registry requires
// (ValidateOptions.ReviewRoles; default architecture, security, data and
// evaluation), each by a reviewer of its own (compared after Unicode
// normalization and case folding) unless
// ValidateOptions.AllowMultiRoleReviewer, so no version is signed or
// published unreviewed: a signed pack file Put for a new version keeps its
// signature but lands in linted (it passed every gate) and goes on through
// Review like any other.
// Publish runs review, signing and publication in one call, and is a no-op
// for a version already published with the sign-offs it is given.
//
// A published version is then pinned per environment (Deployments.Pin),
// promoted there once its golden replay verifies (Promote, with a
// VerifyFunc; a failing replay blocks it with ErrPromotionBlocked), or
// rolled back: Rollback re-pins the prior version of that environment's pin
// history, replays it, and reports how long that took. The registries of
// this module record reviews and pins (LifecycleRegistry), each change in
// one transaction.
//
// # Resolution
//
// A Resolver caches a verified document for its ttl_seconds but reads its
// lifecycle state again on every resolve for UseExecute (a new run) or
// UseResume (a paused or stopped run going on), so a revocation refuses
// the next run and resume at once and a deprecation the next run; both
// stay resolvable for UseReplay.
//
// # Versions and overlays
//
// Diff classes a change patch, minor, major or reject. A change to a gate
// or rule condition is minor only when it provably constrains: the new gate
// condition holds in every case the old one did, or the rule's stricter
// branch still applies in every case. Anything else that can widen power
// (a raised threshold, a widened enum, a changed pattern, a new served
// intent, a removed deny or guardrail, a higher budget) is major. An
// Overlay may only constrain the base pack; ApplyOverlay refuses the rest
// with an *OverlayError naming the rule and path.
//
// # Signed pack files
//
// A signed pack file is one JSON object, written in RFC 8785 canonical form
// (optionally followed by one newline):
//
//	{
//	  "content_hash": "sha256:<hex of the canonical pack>",
//	  "format": "contextos.signed_pack.v1",
//	  "pack": { …the pack document, canonical… },
//	  "signature": {"alg": "Ed25519", "kid": "<key id>", "value": "<base64url signature over content_hash>"}
//	}
//
// Because the whole file is canonical, any changed byte is detected: it
// breaks the JSON, the canonical form, the content hash or the signature.
package pack
