package runcontext

import (
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/contextos/contextos/internal/sortedkeys"
	"math"
	"mime"
	"net/url"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/packref"
	"github.com/contextos/contextos/internal/requestid"
	"github.com/contextos/contextos/internal/sensitive"
	"github.com/contextos/contextos/internal/wire"
)

// Document kinds, named in a ValidationError's message.
const (
	KindInvokeAgent = "invoke-agent"
	KindRunContext  = "run-context"
)

// maxIDLen bounds identifiers so hostile input cannot bloat records.
const maxIDLen = 256

// MaxRequestIDLen bounds request_id in the safe charset: room for any
// prefixed id, a UUID or a ULID, and for a host's own scheme, never for a
// document.
const MaxRequestIDLen = 128

var (
	// requestIDPattern is requestid.Pattern: no space, control or
	// non-ASCII character, no \ ? # % or quote, and no "." or ".."
	// path segment: hosts key logs, files and stores by request_id.
	requestIDPattern = regexp.MustCompile(requestid.Pattern)
	sha256Hex        = regexp.MustCompile(`^(sha256:)?[0-9a-f]{64}$`)
)

// DecodeInvokeRequest strictly decodes an invokeAgent envelope (field names
// are case-sensitive; unknown members of closed objects are refused) and
// validates it. Every problem comes back in one *ValidationError.
func DecodeInvokeRequest(data []byte) (*InvokeRequest, error) {
	var r InvokeRequest
	probs, filled := wire.Decode(data, &r)
	if err := decodeError(KindInvokeAgent, probs, filled, r.Validate); err != nil {
		return nil, err
	}
	return &r, nil
}

// DecodeRunContext strictly decodes and validates a RunContext.
func DecodeRunContext(data []byte) (*RunContext, error) {
	var rc RunContext
	probs, filled := wire.Decode(data, &rc)
	if err := decodeError(KindRunContext, probs, filled, rc.Validate); err != nil {
		return nil, err
	}
	return &rc, nil
}

// decodeError merges decoding problems with the validation problems of
// the decoded value (when it could be decoded), one problem per path.
func decodeError(kind string, probs []wire.Problem, filled bool, validate func() error) error {
	var ps problems
	seen := make(map[string]bool, len(probs))
	for _, p := range probs {
		ps.add(p.Path, CodeDecode, strings.TrimPrefix(p.Message, ErrInvalidEnum.Error()+": "))
		seen[p.Path] = true
	}
	if filled {
		var ve *ValidationError
		if err := validate(); errors.As(err, &ve) {
			for _, p := range ve.Problems {
				if !seen[p.Path] {
					ps.list = append(ps.list, p)
				}
			}
		}
	}
	return ps.err(kind)
}

// Validate checks the envelope against seed 000's field reference and the
// invoke-agent.v1 schema and returns a *ValidationError with every problem,
// or nil.
func (r *InvokeRequest) Validate() error {
	if r == nil {
		return invalid(KindInvokeAgent, []Problem{{Code: CodeRequired, Message: "request is nil"}})
	}
	var ps problems
	checkRequestID(&ps, r.RequestID)
	checkOptionalID(&ps, &at{name: "session_id"}, r.SessionID)
	checkID(&ps, &at{name: "tenant_id"}, r.TenantID)
	checkUser(&ps, &at{name: "user"}, &r.User)
	checkAgent(&ps, &at{name: "agent"}, &r.Agent, r.TenantID)
	if r.Agent.IdentityClaim != nil {
		c := r.Agent.IdentityClaim
		if c.SessionID != "" && r.SessionID != "" && c.SessionID != r.SessionID {
			ps.add("agent.identity_claim.session_id", CodeConsistent, "must equal session_id")
		}
	}
	checkPackRefs(&ps, r.ContextPackRefs)
	if strings.TrimSpace(r.Input.Intent) == "" {
		ps.add("input.intent", CodeRequired, "is required")
	}
	if strings.TrimSpace(r.Input.Message) == "" {
		ps.add("input.message", CodeRequired, "is required")
	}
	switch r.Mode {
	case ModeStream, ModeBatch, ModeLongRunning:
	case "":
		ps.add("mode", CodeRequired, "is required (stream, batch or long_running)")
	default:
		ps.add("mode", CodeEnum, "is not one of stream, batch, long_running")
	}
	checkHints(&ps, &at{name: "runtime"}, &r.Runtime)
	attachments := at{name: "attachments"}
	for i := range r.Attachments {
		checkAttachment(&ps, &at{up: &attachments, index: i, elem: true}, &r.Attachments[i])
	}
	checkTrace(&ps, "trace", r.Trace)
	return ps.err(KindInvokeAgent)
}

// Validate checks the run context against seed 000 and the run-context.v1
// schema and returns a *ValidationError with every problem, or nil.
func (rc *RunContext) Validate() error {
	if rc == nil {
		return invalid(KindRunContext, []Problem{{Code: CodeRequired, Message: "run context is nil"}})
	}
	return rc.validate(false)
}

// validate is Validate of a run context that is not nil. agentChecked
// says that checkAgent already found no problem in rc's agent with rc's
// tenant: the agent of a request that validated, taken with its tenant
// (Materialize), which checkAgent would pass again.
func (rc *RunContext) validate(agentChecked bool) error {
	var ps problems
	checkPrefixedID(&ps, &at{name: "run_id"}, rc.RunID, canon.PrefixRun)
	checkTraceID(&ps, "trace_id", rc.TraceID)
	checkOptionalID(&ps, &at{name: "session_id"}, rc.SessionID)
	checkID(&ps, &at{name: "tenant_id"}, rc.TenantID)
	checkUser(&ps, &at{name: "user"}, &rc.User)
	if !agentChecked {
		checkAgent(&ps, &at{name: "agent"}, &rc.Agent, rc.TenantID)
	}
	switch {
	case rc.SafetyMode == "":
		ps.add("safety_mode", CodeRequired, "is required ("+joinModes()+")")
	case !rc.SafetyMode.Valid():
		ps.add("safety_mode", CodeEnum, "is not one of "+joinModes())
	case rc.SafetyMode.Compare(Delegated) >= 0 && rc.User.Delegation == nil:
		ps.add("user.delegation", CodeRequired, fmt.Sprintf("is required when safety_mode is %s", rc.SafetyMode))
	}
	checkBudget(&ps, &at{name: "run_budget"}, &rc.RunBudget)
	if c := rc.Agent.IdentityClaim; c != nil {
		if c.RunID != "" && c.RunID != rc.RunID {
			ps.add("agent.identity_claim.run_id", CodeConsistent, "must equal run_id")
		}
		if c.SessionID != "" && c.SessionID != rc.SessionID {
			ps.add("agent.identity_claim.session_id", CodeConsistent, "must equal session_id")
		}
	}
	if tc := rc.TraceContext; tc != nil && !plainTraceparent(tc.TraceParent, rc.TraceID) {
		t, err := ParseTraceparent(tc.TraceParent)
		switch {
		case err != nil:
			ps.add("trace_context.traceparent", CodeFormat, "is not a valid W3C traceparent")
		case t.TraceID != rc.TraceID:
			ps.add("trace_context.traceparent", CodeConsistent, "trace id must equal trace_id")
		}
	}
	if tc := rc.TraceContext; tc != nil {
		checkTraceState(&ps, "trace_context.tracestate", tc.TraceState)
		checkBaggage(&ps, "trace_context.baggage", tc.Baggage)
	}
	return ps.err(KindRunContext)
}

func checkID(ps *problems, path *at, v string) {
	checkIDAs(ps, path, v, maxIDLen, isID, "may contain only letters, digits and _ . : @ / - and must start with a letter or digit")
}

func checkOptionalID(ps *problems, path *at, v string) {
	if v != "" {
		checkID(ps, path, v)
	}
}

// checkRequestID checks request_id: seed 000 asks only that it be
// globally unique, so any unique id is accepted — "req_9f3a12", a UUID, a
// ULID — within the safe charset and MaxRequestIDLen; so is any id of the
// earlier "req_" grammar ("req_acme/4711", up to requestid.MaxLegacyLen
// bytes), so that paused runs and recorded packets holding one resume and
// replay.
func checkRequestID(ps *problems, v string) {
	checkIDAs(ps, &at{name: "request_id"}, v, requestid.MaxLegacyLen, isRequestID, requestIDGrammar)
}

// requestIDGrammar is the problem of a request_id that is not in its
// grammar (written once, not at every check).
var requestIDGrammar = fmt.Sprintf("may contain only ASCII letters, digits and _ . : - and must start with a letter or digit (at most %d bytes), or start with \"req_\" and contain only letters, digits and _ . : @ / - with no \".\" or \"..\" path segment (at most %d bytes)", MaxRequestIDLen, requestid.MaxLegacyLen)

// isID reports whether v matches idPattern,
// ^[A-Za-z0-9][A-Za-z0-9_.:@/-]*$, byte by byte (every byte of the
// class is ASCII, so a byte outside it, a non-ASCII one among them, is a
// rune outside it).
func isID(v string) bool {
	if v == "" || !isAlnum(v[0]) {
		return false
	}
	for i := 1; i < len(v); i++ {
		if c := v[i]; !isAlnum(c) && c != '_' && c != '.' && c != ':' && c != '@' && c != '/' && c != '-' {
			return false
		}
	}
	return true
}

// isRequestID reports whether v matches requestIDPattern: the safe
// grammar, [A-Za-z0-9][A-Za-z0-9_.:-]{0,127}, is read byte by byte (one
// branch of the pattern's alternation, so a match of it is a match); any
// other id is left to the pattern.
func isRequestID(v string) bool {
	if len(v) > 0 && len(v) <= MaxRequestIDLen && isAlnum(v[0]) {
		safe := true
		for i := 1; i < len(v) && safe; i++ {
			c := v[i]
			safe = isAlnum(c) || c == '_' || c == '.' || c == ':' || c == '-'
		}
		if safe {
			return true
		}
	}
	return requestIDPattern.MatchString(v)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// agentURNVersion returns the version of an agent URN that matches
// agentURNPattern, ^agent:([a-z0-9][a-z0-9._-]*)/([a-z0-9][a-z0-9._-]*)@([^@/]+)$,
// read without the pattern: the namespace runs to the first "/" and the
// slug to the first "@" after it (neither class holds "/" or "@"), and
// the version is the rest, non-empty, with neither.
func agentURNVersion(urn string) (string, bool) {
	rest, ok := strings.CutPrefix(urn, "agent:")
	if !ok {
		return "", false
	}
	ns, rest, ok := strings.Cut(rest, "/")
	if !ok || !isURNName(ns) {
		return "", false
	}
	slug, version, ok := strings.Cut(rest, "@")
	if !ok || !isURNName(slug) || version == "" || strings.ContainsAny(version, "@/") {
		return "", false
	}
	return version, true
}

// isURNName reports whether s matches [a-z0-9][a-z0-9._-]*.
func isURNName(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkIDAs checks a required id against its length limit and grammar;
// a problem never repeats the value.
func checkIDAs(ps *problems, path *at, v string, maxLen int, match func(string) bool, grammar string) {
	switch {
	case v == "":
		ps.addAt(path, CodeRequired, "is required")
	case len(v) > maxLen:
		ps.addAt(path, CodeFormat, fmt.Sprintf("is longer than %d bytes", maxLen))
	case !match(v):
		ps.addAt(path, CodeFormat, grammar)
	}
}

func checkPrefixedID(ps *problems, path *at, v, prefix string) {
	checkID(ps, path, v)
	if v != "" && !canon.HasPrefix(v, prefix) {
		ps.addAt(path, CodeFormat, fmt.Sprintf("must start with %q", prefix+"_"))
	}
}

func checkUser(ps *problems, path *at, u *UserClaims) {
	checkID(ps, path.m("user_id"), u.UserID)
	if u.TenureDays != nil && *u.TenureDays < 0 {
		ps.addIn(path, "tenure_days", CodeRange, "must be ≥ 0")
	}
	if d := u.Delegation; d != nil {
		dp := path.m("delegation")
		if err := enumText("auth_type", authTypes(), d.AuthType); err != nil {
			if d.AuthType == "" {
				ps.addIn(dp, "auth_type", CodeRequired, "is required (oauth2, saml, oidc or service)")
			} else {
				ps.addIn(dp, "auth_type", CodeEnum, "is not one of oauth2, saml, oidc, service")
			}
		}
		if d.Scopes == nil {
			ps.addIn(dp, "scopes", CodeRequired, "is required")
		}
		for i, s := range d.Scopes {
			if strings.TrimSpace(s) == "" {
				ps.addAt(dp.m("scopes").i(i), CodeFormat, "must not be empty")
			}
		}
		if strings.TrimSpace(d.Subject) == "" {
			ps.addIn(dp, "subject", CodeRequired, "is required")
		}
		checkTokenRef(ps, dp.m("token_ref"), d.TokenRef)
	}
}

func checkAgent(ps *problems, path *at, a *AgentIdentity, tenant string) {
	if a.AgentID != "" {
		checkID(ps, path.m("agent_id"), a.AgentID)
	}
	checkAgentURN(ps, path.m("agent_urn"), a.AgentURN)
	checkSPIFFE(ps, path.m("workload_identity"), a.WorkloadIdentity)
	switch {
	case a.Lifecycle == "":
	case enumText("lifecycle", lifecycles(), a.Lifecycle) != nil:
		ps.addIn(path, "lifecycle", CodeEnum, "is not a lifecycle state (draft, active, suspended, deprecated, retired)")
	case a.Lifecycle != LifecycleActive:
		ps.addIn(path, "lifecycle", CodeConsistent, fmt.Sprintf("agent is %s; only an active agent may run", a.Lifecycle))
	}
	checkTokenRef(ps, path.m("token_ref"), a.TokenRef)
	checkChain(ps, path.m("principal_chain"), a.PrincipalChain, tenant)
	if c := a.IdentityClaim; c != nil {
		checkClaimShape(ps, path.m("identity_claim"), c, a.AgentURN, tenant)
	}
}

func checkAgentURN(ps *problems, path *at, urn string) {
	if urn == "" {
		ps.addAt(path, CodeRequired, "is required (agent:<namespace>/<slug>@<semver>)")
		return
	}
	version, ok := agentURNVersion(urn)
	if !ok || len(urn) > maxIDLen {
		ps.addAt(path, CodeFormat, "must have the form agent:<namespace>/<slug>@<semver> (lowercase namespace and slug)")
		return
	}
	if !plainSemver(version) {
		if _, err := semver.StrictNewVersion(version); err != nil {
			// The version is the caller's text: named, not quoted.
			ps.addAt(path, CodeFormat, "the version after @ is not a semantic version MAJOR.MINOR.PATCH")
		}
	}
}

// plainSemver reports whether v is MAJOR.MINOR.PATCH, three numbers of
// at most 19 digits (each fits in a uint64) with no leading zero: a
// version semver.StrictNewVersion accepts, read without its allocations.
// Any other version is left to StrictNewVersion.
func plainSemver(v string) bool {
	for part := range 3 {
		n := 0
		for n < len(v) && v[n] >= '0' && v[n] <= '9' {
			n++
		}
		if n == 0 || n > 19 || n > 1 && v[0] == '0' {
			return false
		}
		v = v[n:]
		if part < 2 {
			if v == "" || v[0] != '.' {
				return false
			}
			v = v[1:]
		}
	}
	return v == ""
}

func checkSPIFFE(ps *problems, path *at, id string) {
	if id == "" {
		ps.addAt(path, CodeRequired, "is required (spiffe://<trust-domain>/<path>)")
		return
	}
	if plainSPIFFE(id) {
		return
	}
	checkSPIFFEParsed(ps, path, id)
}

// checkSPIFFEParsed is checkSPIFFE of an id that is not empty, with
// url.Parse.
func checkSPIFFEParsed(ps *problems, path *at, id string) {
	const msg = "must be a SPIFFE ID spiffe://<trust-domain>/<path> with no port, user info, query or fragment"
	u, err := url.Parse(id)
	if err != nil || u.Scheme != "spiffe" || u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || len(id) > 2048 {
		ps.addAt(path, CodeFormat, msg)
		return
	}
	host := u.Host
	if host == "" || strings.TrimLeft(host, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != "" {
		ps.addAt(path, CodeFormat, "trust domain must be lowercase letters, digits, '.', '-' or '_'")
		return
	}
	if u.Path == "" || u.Path == "/" {
		ps.addAt(path, CodeFormat, msg)
		return
	}
	for seg := range strings.SplitSeq(strings.TrimPrefix(u.Path, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." || strings.TrimLeft(seg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != "" {
			ps.addAt(path, CodeFormat, "path segments must be non-empty and use only letters, digits, '.', '-' or '_'")
			return
		}
	}
}

// plainSPIFFE reports whether id is spiffe://, a trust domain of
// lowercase letters, digits, '.', '-' and '_', then one or more "/"
// path segments of letters, digits, '.', '-' and '_', none empty, "." or
// "..", within 2048 bytes: an id checkSPIFFE accepts (with none of the
// characters url.Parse reads specially — '@', ':', '?', '#', '%' — it
// parses to exactly that scheme, host and path), read without parsing
// it. Any other id is left to url.Parse.
func plainSPIFFE(id string) bool {
	rest, ok := strings.CutPrefix(id, "spiffe://")
	if !ok || len(id) > 2048 {
		return false
	}
	host, path, ok := strings.Cut(rest, "/")
	if !ok || host == "" || path == "" {
		return false
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !(isAlnum(c) || c == '.' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func checkChain(ps *problems, path *at, chain []Principal, tenant string) {
	for i := range chain {
		p, pp := &chain[i], path.i(i)
		switch {
		case p.Kind == "":
			ps.addIn(pp, "kind", CodeRequired, "is required (user, service, agent or automation)")
		case enumText("kind", principalKinds(), p.Kind) != nil:
			ps.addIn(pp, "kind", CodeEnum, "is not one of user, service, agent, automation")
		}
		if strings.TrimSpace(p.ID) == "" {
			ps.addIn(pp, "id", CodeRequired, "is required")
		}
		if p.TenantID != "" && tenant != "" && p.TenantID != tenant {
			ps.addIn(pp, "tenant_id", CodeConsistent, "must equal the run's tenant_id (a principal chain never crosses tenants)")
		}
	}
}

func checkClaimShape(ps *problems, path *at, c *IdentityClaim, agentURN, tenant string) {
	req := func(name, v string) {
		if strings.TrimSpace(v) == "" {
			ps.addIn(path, name, CodeRequired, "is required")
		}
	}
	if c.Version != ClaimVersion {
		if c.Version == "" {
			ps.addIn(path, "version", CodeRequired, "is required ("+ClaimVersion+")")
		} else {
			ps.addIn(path, "version", CodeEnum, "is not "+ClaimVersion)
		}
	}
	req("iss", c.Iss)
	req("sub", c.Sub)
	req("run_id", c.RunID)
	req("tenant_id", c.TenantID)
	req("kid", c.Kid)
	if c.Sub != "" && agentURN != "" && c.Sub != agentURN {
		ps.addIn(path, "sub", CodeConsistent, "must equal agent.agent_urn")
	}
	if c.TenantID != "" && tenant != "" && c.TenantID != tenant {
		ps.addIn(path, "tenant_id", CodeConsistent, "must equal tenant_id")
	}
	if c.PrincipalChain == nil {
		ps.addIn(path, "principal_chain", CodeRequired, "is required")
	}
	checkChain(ps, path.m("principal_chain"), c.PrincipalChain, tenant)
	if c.Scopes == nil {
		ps.addIn(path, "scopes", CodeRequired, "is required")
	}
	if c.Nbf <= 0 {
		ps.addIn(path, "nbf", CodeRequired, "is required (Unix seconds)")
	}
	if c.Exp <= 0 {
		ps.addIn(path, "exp", CodeRequired, "is required (Unix seconds)")
	} else if c.Exp <= c.Nbf {
		ps.addIn(path, "exp", CodeRange, "must be after nbf")
	}
	atMostSafe(ps, path, "nbf", c.Nbf)
	atMostSafe(ps, path, "exp", c.Exp)
	if !canon.IsDigest(c.ClaimHash) {
		ps.addIn(path, "claim_hash", CodeFormat, "must be sha256:<64 lowercase hex>")
	}
}

func checkPackRefs(ps *problems, refs []string) {
	if len(refs) == 0 {
		ps.add("context_pack_refs", CodeRequired, "needs at least one pinned pack ref (pack_id@MAJOR.MINOR.PATCH)")
		return
	}
	seen := make(map[string]int, len(refs))
	for i, ref := range refs {
		r, err := packref.Parse(ref)
		if err != nil {
			ps.add(wire.Index("context_pack_refs", i), CodeFormat, "is not pinned: "+strings.TrimPrefix(err.Error(), packref.ErrUnpinned.Error()+": "))
			continue
		}
		if j, dup := seen[r.ID]; dup {
			ps.add(wire.Index("context_pack_refs", i), CodeConsistent, fmt.Sprintf("pack %q is already referenced at context_pack_refs[%d]", r.ID, j))
			continue
		}
		seen[r.ID] = i
	}
}

// atMostSafe adds a problem when v is beyond 2^53−1 (canon.MaxSafeInteger):
// a budget, a count or a time that large has no exact canonical form, so
// the run's compiled context, checkpoints and packets could not hold it.
func atMostSafe[T int | int64](ps *problems, path *at, name string, v T) {
	if int64(v) > canon.MaxSafeInteger {
		ps.addIn(path, name, CodeRange, "must be at most 2^53−1")
	}
}

// atMostSafeCost is atMostSafe for a number of cents.
func atMostSafeCost(ps *problems, path *at, name string, v float64) {
	if v > canon.MaxSafeInteger {
		ps.addIn(path, name, CodeRange, "must be at most 2^53−1")
	}
}

func checkHints(ps *problems, path *at, h *RuntimeHints) {
	pos64 := func(name string, v *int64) {
		if v != nil && *v <= 0 {
			ps.addIn(path, name, CodeRange, "must be > 0")
		}
		if v != nil {
			atMostSafe(ps, path, name, *v)
		}
	}
	nonneg := func(name string, v *int) {
		if v != nil && *v < 0 {
			ps.addIn(path, name, CodeRange, "must be ≥ 0")
		}
		if v != nil {
			atMostSafe(ps, path, name, *v)
		}
	}
	pos64("plan_timeout_ms", h.PlanTimeoutMS)
	pos64("max_session_duration_ms", h.MaxSessionDurationMS)
	pos64("max_payload_bytes", h.MaxPayloadBytes)
	pos64("wall_clock_ms", h.WallClockMS)
	nonneg("max_tool_calls", h.MaxToolCalls)
	nonneg("max_replan_attempts", h.MaxReplanAttempts)
	if h.TotalTokens != nil && *h.TotalTokens <= 0 {
		ps.addIn(path, "total_tokens", CodeRange, "must be > 0")
	}
	if h.TotalTokens != nil {
		atMostSafe(ps, path, "total_tokens", *h.TotalTokens)
	}
	if h.MaxCostCents != nil && (*h.MaxCostCents < 0 || math.IsNaN(*h.MaxCostCents) || math.IsInf(*h.MaxCostCents, 0)) {
		ps.addIn(path, "max_cost_cents", CodeRange, "must be a finite number ≥ 0")
	} else if h.MaxCostCents != nil {
		atMostSafeCost(ps, path, "max_cost_cents", *h.MaxCostCents)
	}
	checkBuckets(ps, path.m("bucket_tokens"), h.BucketTokens)
}

func checkBuckets(ps *problems, path *at, b map[Bucket]int) int {
	// Most budgets have no problem: their sum is taken in the map's order
	// (the order of an integer sum does not matter), and only a budget
	// with a problem has its keys sorted, to report the problems in key
	// order.
	sum, ok := 0, true
	for k, v := range b {
		if !k.Valid() || v < 0 || v > canon.MaxSafeInteger {
			ok = false
			break
		}
		sum += v
	}
	if ok {
		return sum
	}
	sum = 0
	for _, k := range sortedkeys.Of(b) {
		switch {
		case !k.Valid():
			ps.addIn(path, string(k), CodeEnum, "is not a context bucket (business, policy, tool, evidence, memory, session)")
		case b[k] < 0:
			ps.addIn(path, string(k), CodeRange, "must be ≥ 0")
		case b[k] > canon.MaxSafeInteger:
			ps.addIn(path, string(k), CodeRange, "must be at most 2^53−1")
		default:
			sum += b[k]
		}
	}
	return sum
}

func checkBudget(ps *problems, path *at, b *RunBudget) {
	if b.TotalTokens <= 0 {
		ps.addIn(path, "total_tokens", CodeRange, "must be > 0")
	}
	// The compiler allocates every context bucket from bucket_tokens, and
	// the session bucket holds the user message whole: without it no
	// compile can succeed, so the run context is refused here, not at the
	// first compile.
	switch {
	case len(b.BucketTokens) == 0:
		ps.addIn(path, "bucket_tokens", CodeRequired, "is required: each context bucket's tokens are allocated from it, and the session bucket holds the user message (DefaultRunBudget allocates "+bucketAllocation(defaultBucketTokens())+")")
	case b.BucketTokens[BucketSession] == 0:
		ps.addAt(path.m("bucket_tokens").m(string(BucketSession)), CodeRange, "must be > 0: the session bucket holds the user message, so a run without it cannot compile")
	}
	atMostSafe(ps, path, "total_tokens", b.TotalTokens)
	atMostSafe(ps, path, "max_tool_calls", b.MaxToolCalls)
	atMostSafe(ps, path, "max_replan_attempts", b.MaxReplanAttempts)
	atMostSafe(ps, path, "wall_clock_ms", b.WallClockMS)
	atMostSafeCost(ps, path, "max_cost_cents", b.MaxCostCents)
	if sum := checkBuckets(ps, path.m("bucket_tokens"), b.BucketTokens); b.TotalTokens > 0 && sum > b.TotalTokens {
		ps.addIn(path, "bucket_tokens", CodeConsistent, fmt.Sprintf("buckets add up to %d tokens, more than total_tokens %d", sum, b.TotalTokens))
	}
	if b.MaxToolCalls < 0 {
		ps.addIn(path, "max_tool_calls", CodeRange, "must be ≥ 0")
	}
	if b.MaxReplanAttempts < 0 {
		ps.addIn(path, "max_replan_attempts", CodeRange, "must be ≥ 0")
	}
	if b.WallClockMS <= 0 {
		ps.addIn(path, "wall_clock_ms", CodeRange, "must be > 0")
	}
	if b.MaxCostCents < 0 || math.IsNaN(b.MaxCostCents) || math.IsInf(b.MaxCostCents, 0) {
		ps.addIn(path, "max_cost_cents", CodeRange, "must be a finite number ≥ 0")
	}
	for _, f := range [...]struct {
		name string
		v    int64
	}{{"plan_timeout_ms", b.PlanTimeoutMS}, {"max_payload_bytes", b.MaxPayloadBytes}, {"max_session_duration_ms", b.MaxSessionDurationMS}} {
		if f.v < 0 {
			ps.addIn(path, f.name, CodeRange, "must be ≥ 0")
		}
		atMostSafe(ps, path, f.name, f.v)
	}
}

// bucketAllocation renders an allocation in bucket order ("policy 1800,
// tool 1500, …").
func bucketAllocation(m map[Bucket]int) string {
	parts := make([]string, 0, len(m))
	for _, b := range Buckets() {
		if n, ok := m[b]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", b, n))
		}
	}
	return strings.Join(parts, ", ")
}

// checkTokenRef refuses a token_ref that holds a credential rather than a
// reference to one (tokenShape). The problem names the kind of credential,
// never the value.
func checkTokenRef(ps *problems, path *at, ref string) {
	if what, ok := tokenShape(ref); ok {
		ps.addAt(path, CodeSecret, "holds "+what+", not a reference to one: a token_ref names a secret the host's store resolves (such as tok_user_7a or vault://…); rotate the credential, since it was sent")
	}
}

// tokenSecrets are the kinds of sensitive data a token_ref must not hold.
// (Not sensitive.Password: "secret:<name>" is a reference, not a
// key=value secret.)
var tokenSecrets = sensitive.Of(sensitive.PrivateKey, sensitive.Credential, sensitive.APIKey, sensitive.URLCredential, sensitive.Encoded)

// minOpaqueToken is the length from which a run of token characters that
// mixes upper case, lower case and digits, changing between them at
// least every two and a half characters on average, is taken for an
// opaque access token. A reference is a name: short, separated by . / :
// _, or made of words ("RefundAgentServiceAccountToken2026" changes class
// 10 times in 34 characters; a random 32-character token about 20).
const minOpaqueToken = 32

// tokenShape reports whether s looks like a credential rather than a
// reference, and what it looks like: a bearer or basic credential, a
// vendor API key, a private key, credentials in a URL, base64 wrapping one
// of those, a JSON Web Token (dot-separated base64url parts, the first a
// JSON object), or an opaque token (a run of at least minOpaqueToken
// letters, digits and - + / = ~ mixing upper case, lower case and digits
// as random text does).
func tokenShape(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	if f, ok := sensitive.Detect(s, tokenSecrets); ok {
		return f.What, true
	}
	if jwtShape(s) {
		return "a JSON Web Token", true
	}
	const other = 3
	run, switches, prev := 0, 0, other
	var seen [4]bool
	for i := 0; i <= len(s); i++ {
		class := -1 // ends the run
		if i < len(s) {
			switch c := s[i]; {
			case c >= 'A' && c <= 'Z':
				class = 0
			case c >= 'a' && c <= 'z':
				class = 1
			case c >= '0' && c <= '9':
				class = 2
			case c == '-' || c == '+' || c == '/' || c == '=' || c == '~':
				class = other
			}
		}
		if class >= 0 {
			if run > 0 && class != prev {
				switches++
			}
			run, prev, seen[class] = run+1, class, true
			continue
		}
		if run >= minOpaqueToken && seen[0] && seen[1] && seen[2] && switches*5 >= run*2 {
			return "an opaque access token", true
		}
		run, switches, prev, seen = 0, 0, other, [4]bool{}
	}
	return "", false
}

// jwtShape reports a JWS or JWE compact serialization: 3 or 5 parts
// separated by dots, the first base64url-encoded JSON (its header).
func jwtShape(s string) bool {
	// The parts are counted and the first cut off, as a strings.Split
	// would give them, without its slice: most token_refs are references
	// and have neither 2 nor 4 dots.
	s = strings.TrimSpace(s)
	if n := strings.Count(s, "."); n != 2 && n != 4 {
		return false
	}
	first, _, _ := strings.Cut(s, ".")
	h, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(first, "="))
	return err == nil && len(h) > 1 && h[0] == '{'
}

func checkAttachment(ps *problems, path *at, a *Attachment) {
	if strings.TrimSpace(a.ArtifactID) == "" {
		ps.addIn(path, "artifact_id", CodeRequired, "is required")
	}
	if strings.TrimSpace(a.MediaType) == "" {
		ps.addIn(path, "media_type", CodeRequired, "is required")
	} else if mt, _, err := mime.ParseMediaType(a.MediaType); err != nil || !strings.Contains(mt, "/") {
		ps.addIn(path, "media_type", CodeFormat, "must be a media type such as application/pdf")
	}
	switch {
	case a.SHA256 == "":
		ps.addIn(path, "sha256", CodeRequired, "is required")
	case !sha256Hex.MatchString(a.SHA256):
		ps.addIn(path, "sha256", CodeFormat, "must be 64 lowercase hex digits (optionally prefixed sha256:)")
	}
	if a.URI == "" {
		ps.addIn(path, "uri", CodeRequired, "is required")
	} else if u, err := url.Parse(a.URI); err != nil || u.Scheme == "" {
		ps.addIn(path, "uri", CodeFormat, "must be an absolute URI")
	} else if u.User != nil {
		ps.addIn(path, "uri", CodeFormat, "must not carry credentials (user info)")
	} else if holdsSecret(a.URI) {
		ps.addIn(path, "uri", CodeFormat, "must not carry credentials (a token, key or signature in its query, fragment or path); pass a reference the host resolves")
	}
	if holdsSecret(a.ArtifactID) {
		ps.addIn(path, "artifact_id", CodeFormat, "must not hold a credential")
	}
	if holdsSecret(a.MediaType) {
		ps.addIn(path, "media_type", CodeFormat, "must not hold a credential")
	}
}

// holdsSecret reports whether the built-in secret detectors find a
// credential in s, as written or percent-decoded: an API key or token, a
// bearer or basic credential, a private key, the value of a secret-named
// query parameter or key=value pair (token=, api_key=, X-Amz-Credential=)
// or of a URL-signing query parameter (sig=, X-Amz-Signature=), or
// base64 wrapping one. An attachment is stored as given in checkpoints,
// packets, events and records, so a credential in it is refused rather
// than kept.
func holdsSecret(s string) bool {
	_, found := sensitive.DetectEscaped(s, sensitive.Secrets)
	return found
}
