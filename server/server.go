package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/sortedkeys"
)

// Stores are the runtime's stores the handler reads, and the store it
// keeps its own state in. Give it the stores the runtime was built with
// (a durable store's Checkpoints, Records, Transcripts and Idempotency):
// replicas sharing them share every run, pause and decision.
type Stores struct {
	// Checkpoints are the runs PendingApprovals looks at (required unless
	// Options.Pending lists the pending approvals). When it is the
	// runtime's checkpoint store (a contextos.ListingCheckpointStore), the
	// sweep also takes over decided runs whose replica died continuing
	// them (Options.SweepInterval).
	Checkpoints contextos.CheckpointLister
	// Records is the runtime's decision store (required).
	Records decision.Store
	// Transcripts, when set, is the runtime's transcript: the tool
	// results of a run this handler did not run are read from it.
	Transcripts gateway.TranscriptReader
	// State keeps who started each run, each approval decision and the
	// events of each run segment (so every replica, and the handler after
	// a restart, streams a run's events from its start), as write-once
	// entries under keys of the handler's own; pass the runtime's
	// idempotency store (the gateway's keys never collide with them).
	// Replicas must share it: it is what makes a decision count once
	// across them. Default: in memory (one replica), where runs' events
	// are not kept, so that memory does not grow with every run: a run
	// the handler no longer holds (Options.RetainRuns) streams the events
	// rebuilt from the other stores.
	State gateway.IdempotencyStore
}

// PendingLister lists the approvals paused runs await, of one tenant or,
// for tenantID "", of every tenant. The default is
// Runtime.PendingApprovalsOf over Stores.Checkpoints: a checkpoint read
// per pending approval of the tenant when the store keeps the pending
// index (contextos.PendingIndex, as the in-memory, SQLite and PostgreSQL
// stores do), per stored run otherwise.
type PendingLister interface {
	PendingApprovals(ctx context.Context, tenantID string) ([]contextos.PendingApproval, error)
}

// Options tunes a Handler. The zero value refuses every request (it has
// no authenticator) and otherwise uses the defaults each field names.
type Options struct {
	// Authenticator verifies the bearer token of every request but the
	// health checks. Without one, every request is refused unless
	// InsecureDev is set.
	Authenticator Authenticator
	// InsecureDev, without an Authenticator, reads the claims of a bearer
	// token without verifying its signature, for development on one
	// machine: requests from any address but loopback are refused.
	InsecureDev bool
	// DevTokens is how an InsecureDev handler reads tokens (claim names;
	// its clock defaults to Now). Ignored with an Authenticator.
	DevTokens *JWTOptions
	// InvokeRoles, when set, are the roles of which a principal must hold
	// one to start a run. Default: any principal of the request's tenant.
	InvokeRoles []string
	// Pending lists the pending approvals. Default: Runtime.PendingApprovals
	// over Stores.Checkpoints.
	Pending PendingLister
	// Redactors are the host's redaction rules (the runtime's
	// Options.Gateway.Redactors): events are redacted by them and by every
	// built-in rule before any answer carries them.
	Redactors map[string]gateway.Redactor
	// BasePath is the path the host mounts the handler under ("/ops"),
	// for the links and Location headers it writes. Default: "".
	BasePath string
	// Now is the clock (decisions' times, approval expiry). Default:
	// time.Now. Keep it the runtime's clock.
	Now func() time.Time
	// TracerProvider makes a server span per request (OpenTelemetry's
	// HTTP conventions: "POST /v1/runs", the route, the status). Give it
	// the runtime's Options.TracerProvider. Default: no spans.
	TracerProvider trace.TracerProvider
	// Logger receives a line per decision and per failure. Default:
	// discard.
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body. Default: 1 MiB.
	MaxBodyBytes int64
	// RequestTimeout bounds a request other than an event stream and a
	// waiting POST /v1/runs. Default: 30 s.
	RequestTimeout time.Duration
	// SyncWait is how long a POST /v1/runs without "Prefer:
	// respond-async" waits for its run to end or pause before it answers
	// 202 with the run's Location (the run goes on). Default: 60 s.
	SyncWait time.Duration
	// MaxRuns bounds the runs and resumes in flight on this handler; a
	// POST /v1/runs over it is answered 503. Default: 64.
	MaxRuns int
	// RetainRuns bounds how many ended runs' event logs the handler keeps
	// in memory (a run it no longer holds streams the events Stores.State
	// keeps of it). Default: 1000.
	RetainRuns int
	// SweepInterval is how often the handler looks for decided approvals
	// whose run no worker continued (a replica stopped in between) and
	// continues them, taking over a run whose replica died after its
	// resume claimed it once the claim's lease has lapsed (when
	// Stores.Checkpoints can load them: the runs its pending index lists,
	// every run when it keeps none). Default: 30 s; negative: never.
	SweepInterval time.Duration
}

// Handler is the embeddable HTTP service over a Runtime: the /v1 API, the
// approvals inbox and the health checks. Build one with New, mount it,
// and Close it after the server stops accepting requests.
type Handler struct {
	rt     *contextos.Runtime
	stores Stores
	o      Options
	auth   Authenticator
	ledger *ledger
	// keepEvents: segments' events are stored (Stores.State is the
	// host's).
	keepEvents bool
	pending    PendingLister
	redaction  *redaction
	cache      redacted
	mux        *http.ServeMux
	root       http.Handler
	pages      pages

	base   context.Context
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close: the sweep loop ends
	wg     sync.WaitGroup
	slots  chan struct{}

	mu      sync.Mutex
	runs    map[string]*runEntry
	ended   []string // run ids of ended entries, oldest first
	closing bool
}

// New returns a handler over rt and its stores.
func New(rt *contextos.Runtime, stores Stores, opts *Options) (*Handler, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case rt == nil:
		return nil, fmt.Errorf("%w: New needs a runtime", ErrConfig)
	case stores.Records == nil:
		return nil, fmt.Errorf("%w: Stores.Records is required (the runtime's decision store)", ErrConfig)
	case stores.Checkpoints == nil && o.Pending == nil:
		return nil, fmt.Errorf("%w: Stores.Checkpoints is required to list pending approvals (or set Options.Pending)", ErrConfig)
	case o.Authenticator != nil && o.InsecureDev:
		return nil, fmt.Errorf("%w: InsecureDev is for a handler without an Authenticator", ErrConfig)
	case o.BasePath != "" && (!strings.HasPrefix(o.BasePath, "/") || strings.HasSuffix(o.BasePath, "/")):
		return nil, fmt.Errorf("%w: BasePath must start with / and not end with one", ErrConfig)
	}
	// The handler's own copy: a host editing the slice it handed over
	// changes no role check.
	o.InvokeRoles = slices.Clone(o.InvokeRoles)
	for _, r := range o.InvokeRoles {
		if strings.TrimSpace(r) == "" {
			return nil, fmt.Errorf("%w: InvokeRoles holds an empty role", ErrConfig)
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.SyncWait <= 0 {
		o.SyncWait = time.Minute
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 64
	}
	if o.RetainRuns <= 0 {
		o.RetainRuns = 1000
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = 30 * time.Second
	}
	keepEvents := stores.State != nil
	if stores.State == nil {
		stores.State = gateway.NewMemoryIdempotency()
	}
	h := &Handler{rt: rt, stores: stores, o: o, auth: o.Authenticator, ledger: newLedger(stores.State), keepEvents: keepEvents, pending: o.Pending,
		slots: make(chan struct{}, o.MaxRuns), runs: map[string]*runEntry{}, stop: make(chan struct{}), cache: redacted{records: map[string]json.RawMessage{}}}
	if h.auth == nil && o.InsecureDev {
		dev := o.DevTokens.withDefaults()
		if o.DevTokens == nil || o.DevTokens.Now == nil {
			dev.Now = o.Now
		}
		h.auth = &devAuth{opts: dev}
	}
	if h.pending == nil {
		h.pending = runtimePending{rt: rt, runs: stores.Checkpoints}
	}
	h.redaction = newRedaction(o.Redactors)
	var err error
	if h.pages, err = parsePages(); err != nil {
		return nil, err
	}
	h.routes()
	h.base, h.cancel = context.WithCancel(context.Background())
	if o.SweepInterval > 0 {
		h.wg.Add(1)
		go h.sweepLoop()
	}
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.root.ServeHTTP(w, r) }

// Close stops the handler: new runs and decisions are refused (503), and
// it waits for the runs and resumes in flight until ctx ends, when it
// cancels them (a cancelled run stops with its record, resumable). Call
// it after http.Server.Shutdown.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	if !h.closing {
		h.closing = true
		close(h.stop)
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		h.cancel()
		return nil
	case <-ctx.Done():
		h.cancel()
		<-done
		return ctx.Err()
	}
}

// routes registers every path: its methods, and a 405 problem for the
// others.
func (h *Handler) routes() {
	m := http.NewServeMux()
	type route struct {
		method, path string
		fn           http.HandlerFunc
	}
	routes := []route{
		{"GET", "/healthz", h.healthz},
		{"GET", "/readyz", h.readyz},
		{"POST", "/v1/runs", h.postRun},
		{"GET", "/v1/runs/{run_id}", h.getRun},
		{"GET", "/v1/runs/{run_id}/events", h.runEvents},
		{"GET", "/v1/approvals", h.listApprovals},
		{"POST", "/v1/runs/{run_id}/approvals/{gate_id}", h.postDecision},
		{"GET", "/v1/records", h.listRecords},
		{"GET", "/v1/records/verify", h.verifyRecords},
		{"GET", "/v1/records/{record_id}", h.getRecord},
		{"GET", "/inbox", h.inbox},
		{"GET", "/inbox/runs/{run_id}", h.inboxRun},
		{"POST", "/inbox/runs/{run_id}/approvals/{gate_id}", h.inboxDecide},
		{"GET", "/inbox/runs/{run_id}/records", h.inboxRecords},
		{"GET", "/inbox/signin", h.signinPage},
		{"POST", "/inbox/signin", h.signin},
		{"POST", "/inbox/signout", h.signout},
		{"GET", "/inbox/static/inbox.css", h.stylesheet},
	}
	byPath := map[string]map[string]http.HandlerFunc{}
	var paths []string
	for _, rt := range routes {
		if byPath[rt.path] == nil {
			byPath[rt.path] = map[string]http.HandlerFunc{}
			paths = append(paths, rt.path)
		}
		byPath[rt.path][rt.method] = rt.fn
	}
	for _, path := range paths {
		fns := byPath[path]
		allowed := sortedkeys.Of(fns)
		if fns["GET"] != nil {
			fns["HEAD"] = fns["GET"]
			allowed = append(allowed, "HEAD")
		}
		allow := strings.Join(allowed, ", ")
		m.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if fn := fns[r.Method]; fn != nil {
				fn(w, r)
				return
			}
			w.Header().Set("Allow", allow)
			writeProblem(w, errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed here (allowed: %s)", clip(r.Method), allow))
		})
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, errorf(http.StatusNotFound, CodeNotFound, "no such resource"))
	})
	h.mux = m
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, forbidden(RuleCrossOrigin, "a cross-origin request that changes state is refused"))
	}))
	h.root = cop.Handler(m)
	if h.o.TracerProvider != nil {
		h.root = traced(h.o.TracerProvider, h.redactText, h.root)
	}
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the handler can serve: it has an authenticator
// (or is in insecure development), is not closing, and its decision store
// answers.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	closing := h.closing
	h.mu.Unlock()
	switch {
	case h.auth == nil:
		writeProblem(w, errorf(http.StatusServiceUnavailable, CodeUnavailable, "no authenticator is configured: every request is refused"))
		return
	case closing:
		writeProblem(w, errorf(http.StatusServiceUnavailable, CodeUnavailable, "shutting down"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := h.stores.Records.Get(ctx, "dr_readiness_probe"); err != nil && !errors.Is(err, decision.ErrNotFound) {
		h.o.Logger.Error("readiness: decision store", "error", err.Error())
		writeProblem(w, errorf(http.StatusServiceUnavailable, CodeUnavailable, "the decision store does not answer"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// authenticate returns the request's principal: from its bearer token,
// or on inbox pages from the session cookie the sign-in page set.
func (h *Handler) authenticate(r *http.Request, cookie bool) (*Principal, *apiError) {
	if h.auth == nil {
		e := errorf(http.StatusUnauthorized, CodeUnauthenticated, "this service has no authenticator configured and refuses every request")
		e.Rule = RuleNoAuthConfig
		return nil, e
	}
	if h.o.InsecureDev && h.o.Authenticator == nil && !isLoopback(r.RemoteAddr) {
		return nil, forbidden(RuleLoopbackOnly, "an insecure development service answers loopback requests only")
	}
	tok := bearer(r)
	if tok == "" && cookie {
		if c, err := r.Cookie(sessionCookie); err == nil {
			tok = c.Value
		}
	}
	if tok == "" {
		e := errorf(http.StatusUnauthorized, CodeUnauthenticated, "a bearer token is required (Authorization: Bearer …)")
		e.Rule = RuleTokenRequired
		return nil, e
	}
	p, err := h.auth.Authenticate(r.Context(), tok)
	if err != nil {
		var te *TokenError
		if errors.As(err, &te) {
			return nil, errorf(http.StatusUnauthorized, CodeUnauthenticated, "%s", strings.TrimPrefix(te.Error(), "server: "))
		}
		if errors.Is(err, ErrUnauthenticated) {
			return nil, errorf(http.StatusUnauthorized, CodeUnauthenticated, "the bearer token is not valid")
		}
		h.o.Logger.Error("authenticator failed", "error", err.Error())
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "the token could not be verified now")
	}
	return p, nil
}

// withTimeout bounds r by RequestTimeout.
func (h *Handler) withTimeout(r *http.Request) (*http.Request, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), h.o.RequestTimeout)
	return r.WithContext(ctx), cancel
}

// path is the handler-relative path p as the client sees it.
func (h *Handler) path(p string) string { return h.o.BasePath + p }

// acquire takes a worker slot, or reports none free or the handler
// closing.
func (h *Handler) acquire() *apiError {
	h.mu.Lock()
	closing := h.closing
	h.mu.Unlock()
	if closing {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the service is shutting down")
	}
	select {
	case h.slots <- struct{}{}:
		return nil
	default:
		return errorf(http.StatusServiceUnavailable, CodeBusy, "%d runs are in flight; try again shortly", cap(h.slots))
	}
}

func (h *Handler) release() { <-h.slots }

// runtimePending is the default PendingLister: Runtime.PendingApprovals
// over the checkpoint store.
type runtimePending struct {
	rt   *contextos.Runtime
	runs contextos.CheckpointLister
}

func (p runtimePending) PendingApprovals(ctx context.Context, tenantID string) ([]contextos.PendingApproval, error) {
	if tenantID == "" {
		return p.rt.PendingApprovals(ctx, p.runs)
	}
	return p.rt.PendingApprovalsOf(ctx, p.runs, tenantID)
}
