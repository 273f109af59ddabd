package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/contextos/contextos/server"
)

// serveFlags are serve's flags: run's packs, planner, tools, evidence,
// memory, ontologies, overlays, redactors, endpoints and store, and the
// service's own.
type serveFlags struct {
	run runFlags
	// addr is --addr, the listen address.
	addr string
	// jwks, oidc and hs256 name the authenticator; audience and issuer
	// bind its tokens; claimTenant and claimRoles rename claims.
	jwks, oidc, hs256, audience, issuer, claimTenant, claimRoles string
	invokeRoles                                                  string
	insecureDev                                                  bool
	// webhook and webhookSecret are the pause webhook; inboxURL is the
	// inbox's public URL its events link to.
	webhook, webhookSecret, inboxURL string
}

// defaultServeStore is the store serve uses without --store.
const defaultServeStore = "sqlite:contextos.db"

func (f *serveFlags) register(fs *flag.FlagSet) {
	r := &f.run
	r.packs.register(fs)
	r.store.register(fs)
	r.claims.register(fs)
	fs.Var(&r.ontologies, "ontology", "ontology the host declares, `NS@VERSION` (repeatable)")
	fs.StringVar(&r.plan, "plan", "", "plan `FILE`: a JSON array of planner turns (each run plans with them)")
	fs.StringVar(&r.planner, "planner", "", "plan with a model instead of --plan: `openai:MODEL` or anthropic:MODEL (key and base URL from OPENAI_API_KEY/OPENAI_BASE_URL or ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL)")
	fs.StringVar(&r.price, "price", "", "the --planner model's price, USD per million tokens: `MODEL=IN/OUT[/CACHED[/CACHE_WRITE]]`")
	fs.StringVar(&r.tools, "tools", "", "tools `FILE`: capability id → the results of its successive calls")
	fs.StringVar(&r.evidence, "evidence", "", "evidence `FILE`: a JSON array of items")
	fs.StringVar(&r.memory, "memory", "", "memory `FILE`: a JSON array of items")
	fs.StringVar(&r.endpoints, "endpoints", "", "endpoints `FILE`: endpoint_ref → {transport, url|command, auth, …}; those adapters are called for real")
	fs.StringVar(&r.secrets, "secrets", "", "secrets `FILE`: secret name → value (or {key: value}) for the endpoints' auth")
	fs.StringVar(&r.now, "now", "", "fixed clock, RFC 3339, for demos and tests (default: the wall clock; with it approvals never expire)")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen `ADDRESS` (host:port; port 0 picks one)")
	fs.StringVar(&f.jwks, "auth-jwks", "", "verify bearer tokens with the public keys of the JSON Web Key Set `FILE`")
	fs.StringVar(&f.oidc, "auth-oidc", "", "verify bearer tokens with the keys of the OpenID Connect `ISSUER` (needs --auth-audience)")
	fs.StringVar(&f.hs256, "auth-hs256", "", "verify HS256 bearer tokens with the shared secret in `FILE` (at least 32 bytes; surrounding white space is ignored)")
	fs.StringVar(&f.audience, "auth-audience", "", "an `AUDIENCE` tokens' aud must contain (required with --auth-oidc)")
	fs.StringVar(&f.issuer, "auth-issuer", "", "the `ISSUER` tokens' iss must be (--auth-jwks, --auth-hs256)")
	fs.StringVar(&f.claimTenant, "claim-tenant", server.DefaultTenantClaim, "the token claim that names the caller's tenant (`NAME`)")
	fs.StringVar(&f.claimRoles, "claim-roles", server.DefaultRolesClaim, "the token claim that lists the caller's roles (`NAME`)")
	fs.StringVar(&f.invokeRoles, "invoke-roles", "", "comma-separated `ROLES` of which a caller must hold one to start a run (default: any caller of the request's tenant)")
	fs.BoolVar(&f.insecureDev, "insecure-dev", false, "without an authenticator, read bearer tokens without verifying them; only on a loopback --addr, for development")
	fs.StringVar(&f.webhook, "webhook", "", "POST each pause to `URL`, signed per the Standard Webhooks specification (needs --webhook-secret)")
	fs.StringVar(&f.webhookSecret, "webhook-secret", "", "the webhook's signing secret `FILE` (whsec_ and the base64 of 24 to 64 bytes)")
	fs.StringVar(&f.inboxURL, "inbox-url", "", "the inbox's public `URL` (https://ops.example.com/inbox); webhook events link to the run's page")
}

func cmdServe(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: contextos serve --pack FILE… [--pub PUBFILE | --allow-unsigned] (--plan FILE | --planner openai:MODEL|anthropic:MODEL [--price …]) --tools FILE
       (--auth-jwks FILE | --auth-oidc ISSUER --auth-audience AUD | --auth-hs256 FILE | --insecure-dev) [--auth-issuer ISS]
       [--claim-tenant NAME] [--claim-roles NAME] [--invoke-roles ROLE,…] [--addr HOST:PORT] [--store sqlite:PATH|postgres://…]
       [--webhook URL --webhook-secret FILE [--inbox-url URL]] [--evidence FILE] [--memory FILE] [--ontology NS@VERSION…]
       [--overlay FILE…] [--redactors FILE] [--endpoints FILE [--secrets FILE]] [--claim-pub FILE…] [--now RFC3339]

Serves the runtime over HTTP: the /v1 API (runs, events, approvals, records), the
approvals inbox at /inbox, and /healthz and /readyz, on --addr (default
127.0.0.1:8080), with every run, pause, decision and record in --store (default
sqlite:contextos.db; replicas share a postgres:// store). Callers authenticate with
a bearer JWT verified by one of --auth-jwks, --auth-oidc or --auth-hs256; its sub,
tenant and roles claims make the principal. SIGTERM or SIGINT stops it gracefully:
no new requests, then the runs in flight finish (for up to 30 s). With
OTEL_EXPORTER_OTLP_ENDPOINT set, spans and metrics are exported over OTLP/HTTP
(the standard OTEL_* variables configure it). Exit 0 after a graceful stop, 2 on
a usage or startup error.`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	fail := func(err error) int { return failCmd(stderr, "serve", err) }
	if fs.NArg() != 0 {
		return fail(exitf(exitUsage, "takes no arguments"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	svc, err := startServe(ctx, &f, stdin, stderr)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stderr, "contextos serve: listening on http://%s (store: %s)\n", svc.addr, storeKind(f.run.store.spec))
	return fail(svc.run(ctx, stderr))
}

// storeKind names the store without its address or credentials.
func storeKind(spec string) string {
	if strings.HasPrefix(spec, "sqlite:") {
		return spec
	}
	return "postgres"
}

// service is a started contextos serve.
type service struct {
	addr    string
	ln      net.Listener
	srv     *http.Server
	handler *server.Handler
	webhook *server.Webhook
	closers []func()
}

// startServe checks the flags, opens the store, builds the runtime and
// the handler, and listens.
func startServe(ctx context.Context, f *serveFlags, stdin io.Reader, stderr io.Writer) (svc *service, err error) {
	r := &f.run
	switch {
	case r.plan == "" && r.planner == "" || r.tools == "":
		return nil, exitf(exitUsage, "--pack, --plan (or --planner) and --tools are required")
	case r.plan != "" && r.planner != "":
		return nil, exitf(exitUsage, "--plan and --planner are alternatives: give one")
	case (f.webhook == "") != (f.webhookSecret == ""):
		return nil, exitf(exitUsage, "--webhook and --webhook-secret go together")
	}
	n := 0
	for _, v := range []string{f.jwks, f.oidc, f.hs256} {
		if v != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, exitf(exitUsage, "give one of --auth-jwks, --auth-oidc and --auth-hs256")
	case n == 1 && f.insecureDev:
		return nil, exitf(exitUsage, "--insecure-dev is for a service without an authenticator")
	case n == 0 && !f.insecureDev:
		return nil, exitf(exitUsage, "give an authenticator (--auth-jwks, --auth-oidc or --auth-hs256), or --insecure-dev on a loopback --addr")
	case f.insecureDev && !loopbackAddr(f.addr):
		return nil, exitf(exitUsage, "--insecure-dev serves a loopback --addr only (127.0.0.1, ::1 or localhost)")
	}
	jopts := &server.JWTOptions{TenantClaim: f.claimTenant, RolesClaim: f.claimRoles, Audience: f.audience, Issuer: f.issuer}
	var auth server.Authenticator
	switch {
	case f.jwks != "":
		data, err := os.ReadFile(f.jwks)
		if err != nil {
			return nil, exitf(exitUsage, "--auth-jwks: %v", err)
		}
		if auth, err = server.NewJWKSAuthenticator(data, jopts); err != nil {
			return nil, exitf(exitUsage, "--auth-jwks: %v", err)
		}
	case f.hs256 != "":
		data, err := os.ReadFile(f.hs256)
		if err != nil {
			return nil, exitf(exitUsage, "--auth-hs256: %v", err)
		}
		if auth, err = server.NewHS256Authenticator([]byte(strings.TrimSpace(string(data))), jopts); err != nil {
			return nil, exitf(exitUsage, "--auth-hs256: %v", err)
		}
	case f.oidc != "":
		if f.issuer != "" {
			return nil, exitf(exitUsage, "--auth-issuer is --auth-oidc's issuer already")
		}
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var err error
		if auth, err = server.NewOIDCAuthenticator(octx, f.oidc, jopts); err != nil {
			return nil, exitf(exitUsage, "--auth-oidc: %v", err)
		}
	}
	var invokeRoles []string
	for _, role := range strings.Split(f.invokeRoles, ",") {
		if role = strings.TrimSpace(role); role != "" {
			invokeRoles = append(invokeRoles, role)
		}
	}
	s := &service{}
	defer func() {
		if err != nil {
			s.close() // what was opened before the failure
		}
	}()
	svc = s
	if f.webhook != "" {
		data, err := os.ReadFile(f.webhookSecret)
		if err != nil {
			return nil, exitf(exitUsage, "--webhook-secret: %v", err)
		}
		key, err := server.ParseWebhookSecret(string(data))
		if err != nil {
			return nil, exitf(exitUsage, "--webhook-secret: %v", err)
		}
		// The webhook redacts an event's arguments by every rule the
		// service's answers are redacted by (--redactors included). It
		// is built, and a bad --webhook refused, before the store is
		// opened.
		if err := r.packs.redactors.load(stdin); err != nil {
			return nil, exitf(exitInvalid, "%v", err)
		}
		logger := slog.New(slog.NewTextHandler(stderr, nil))
		wh, err := server.NewWebhook(f.webhook, key, &server.WebhookOptions{InboxURL: f.inboxURL, Logger: logger, Redactors: r.packs.redactors.rules})
		if err != nil {
			return nil, exitf(exitUsage, "--webhook: %v", err)
		}
		svc.webhook = wh
	}
	tel, err := newTelemetry(ctx, os.Getenv)
	if err != nil {
		return nil, exitf(exitUsage, "%v", err)
	}
	if tel != nil {
		svc.closers = append(svc.closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tel.shutdown(sctx); err != nil {
				fmt.Fprintln(stderr, "contextos serve: telemetry:", err)
			}
		})
	}
	if r.store.spec == "" {
		r.store.spec = defaultServeStore
	}
	st, err := r.store.open(ctx)
	if err != nil {
		return nil, err
	}
	svc.closers = append(svc.closers, func() { st.Close() })
	in, err := loadRunInputs(ctx, r, stdin)
	if err != nil {
		return nil, err
	}
	if svc.webhook != nil {
		in.onPause = svc.webhook.Notify
	}
	in.tracer, in.meter = tel.tracerProvider(), tel.meterProvider()
	rt, closeLive, err := buildRunRuntime(ctx, r, in, st, stdin, stderr)
	if err != nil {
		return nil, err
	}
	svc.closers = append(svc.closers, closeLive)
	h, err := server.New(rt, server.Stores{Checkpoints: st.Checkpoints(), Records: st.Records(), Transcripts: st.Transcripts(), State: st.Idempotency()},
		&server.Options{Authenticator: auth, InsecureDev: f.insecureDev, DevTokens: jopts, InvokeRoles: invokeRoles, Redactors: r.packs.redactors.rules,
			Now: in.now, Logger: slog.New(slog.NewTextHandler(stderr, nil)), TracerProvider: tel.tracerProvider()})
	if err != nil {
		return nil, exitf(exitUsage, "%v", err)
	}
	svc.handler = h
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, exitf(exitUsage, "--addr: %v", err)
	}
	svc.ln, svc.addr = ln, ln.Addr().String()
	svc.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	return svc, nil
}

// loopbackAddr reports whether a listen address is on loopback.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// run serves until ctx ends, then stops gracefully.
func (s *service) run(ctx context.Context, stderr io.Writer) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
		fmt.Fprintln(stderr, "contextos serve: stopping")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, "contextos serve: shutdown:", err)
	}
	s.close()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return exitf(exitUsage, "%v", serveErr)
	}
	return nil
}

// close stops the handler's work, the webhook and the store.
func (s *service) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.handler != nil {
		_ = s.handler.Close(ctx)
	}
	if s.webhook != nil {
		_ = s.webhook.Close(ctx)
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	if s.ln != nil && s.srv == nil {
		s.ln.Close()
	}
}
