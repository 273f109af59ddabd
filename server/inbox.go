package server

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/internal/sortedkeys"
)

// The approvals inbox: server-rendered pages (html/template, no script)
// that honour the same bearer token as the API. Behind a single sign-on
// proxy the proxy passes the token in Authorization; used directly, the
// sign-in page keeps a token in the session cookie, which only the inbox
// pages read (never the /v1 API). Form posts are refused across origins
// (http.CrossOriginProtection), and the cookie is SameSite=Strict and
// HttpOnly.

//go:embed inbox
var inboxFS embed.FS

// sessionCookie holds the bearer token of a direct sign-in.
const sessionCookie = "contextos_session"

// pageNames are the inbox's pages, each parsed with the layout.
var pageNames = []string{"list", "run", "records", "signin", "error"}

type pages map[string]*template.Template

func parsePages() (pages, error) {
	funcs := template.FuncMap{
		"join":    strings.Join,
		"argRows": argRows,
		"stamp":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"left":    timeLeft,
	}
	out := pages{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(inboxFS, "inbox/layout.html", "inbox/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("server: inbox page %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// argRow is one argument of a paused call, its value as JSON.
type argRow struct{ Key, Value string }

func argRows(args map[string]any) []argRow {
	out := make([]argRow, 0, len(args))
	for _, k := range sortedkeys.Of(args) {
		b, err := json.Marshal(args[k])
		if err != nil {
			b = []byte("?")
		}
		out = append(out, argRow{Key: k, Value: string(b)})
	}
	return out
}

// timeLeft says how long an approval stays approvable.
func timeLeft(v approvalView) string {
	if v.Expired {
		return "expired — it can only be denied"
	}
	d := time.Duration(v.SecondsLeft) * time.Second
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh %02dm left", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %02ds left", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds left", int(d.Seconds()))
}

// pageData is what a page renders.
type pageData struct {
	Title     string
	Base      string
	Principal *Principal
	Problem   *apiError
	Flash     string

	Approvals []approvalView

	RunID     string
	Approval  *approvalView
	Run       *runView
	Evidence  []string
	Rationale string
	Rules     []string
	CanDecide bool
	Why       string
	Decided   *decisionEntry

	Records []*decision.Record
	Chain   *chainReport
}

// render writes page name with the inbox's security headers.
func (h *Handler) render(w http.ResponseWriter, status int, name string, d *pageData) {
	d.Base = h.o.BasePath
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", d); err != nil {
		h.o.Logger.Error("inbox page", "page", name, "error", err.Error())
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (h *Handler) pageError(w http.ResponseWriter, p *Principal, e *apiError) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	h.render(w, e.Status, "error", &pageData{Title: http.StatusText(e.Status), Principal: p, Problem: e})
}

// page authenticates an inbox request (bearer token or session cookie)
// and bounds it by RequestTimeout.
func (h *Handler) page(w http.ResponseWriter, r *http.Request) (*http.Request, *Principal, context.CancelFunc, bool) {
	r, cancel := h.withTimeout(r)
	p, aerr := h.authenticate(r, true)
	if aerr != nil {
		cancel()
		h.pageError(w, nil, aerr)
		return nil, nil, nil, false
	}
	return r, p, cancel, true
}

func (h *Handler) inbox(w http.ResponseWriter, r *http.Request) {
	r, p, cancel, ok := h.page(w, r)
	if !ok {
		return
	}
	defer cancel()
	list, aerr := h.decidable(r.Context(), p)
	if aerr != nil {
		h.pageError(w, p, aerr)
		return
	}
	h.render(w, http.StatusOK, "list", &pageData{Title: "Inbox", Principal: p, Approvals: list})
}

// inboxRun shows a run: its pending approval in full (run, tenant, gate,
// role, capability, redacted arguments, action digest, evidence, policy
// rationale, time left) with the decision form when the caller may
// decide, or its state and decision once decided.
func (h *Handler) inboxRun(w http.ResponseWriter, r *http.Request) {
	r, p, cancel, ok := h.page(w, r)
	if !ok {
		return
	}
	defer cancel()
	d, aerr := h.runPage(r.Context(), p, r.PathValue("run_id"))
	if aerr != nil {
		h.pageError(w, p, aerr)
		return
	}
	switch r.URL.Query().Get("decided") {
	case DecisionApprove:
		d.Flash = "Approved. The run continues with your approval."
	case DecisionDeny:
		d.Flash = "Denied. The run continues without the action."
	}
	h.render(w, http.StatusOK, "run", d)
}

func (h *Handler) runPage(ctx context.Context, p *Principal, runID string) (*pageData, *apiError) {
	d := &pageData{Title: "Run " + runID, Principal: p, RunID: runID}
	pend, err := h.rt.PendingApprovals(ctx, contextos.RunList{runID})
	if err != nil {
		return nil, h.storeError("pending approvals", err)
	}
	for _, pa := range pend {
		if pa.RunID != runID || pa.TenantID != p.TenantID {
			continue
		}
		v := h.view(pa)
		d.Approval = &v
		if pa.RecordID != "" {
			rec, err := h.stores.Records.Get(ctx, pa.RecordID)
			if err != nil && !errors.Is(err, decision.ErrNotFound) {
				return nil, h.storeError("get record", err)
			}
			if rec != nil {
				d.Evidence = rec.EvidenceRefs
				d.Rationale = rec.Rationale.Summary
				for _, pd := range rec.PolicyDecisions {
					for _, id := range pd.RuleIDs {
						if !slices.Contains(d.Rules, id) {
							d.Rules = append(d.Rules, id)
						}
					}
				}
			}
		}
		self, err := h.isRequester(ctx, p, pa)
		if err != nil {
			return nil, h.storeError("run requesters", err)
		}
		raw, decided, err := h.ledger.get(ctx, pendingKey(pa))
		if err != nil {
			return nil, h.storeError("read decision", err)
		}
		switch {
		case decided:
			var de decisionEntry
			if json.Unmarshal(raw, &de) == nil {
				de.Reason = h.redactText(de.Reason) // shown redacted, whatever the ledger holds
				d.Decided = &de
			}
			d.Why = "This approval is decided; the run is being continued."
		case !p.HasRole(pa.ApproverRole):
			d.Why = "Deciding needs the role " + pa.ApproverRole + ", which you do not hold."
		case self:
			d.Why = "You requested or started this run; someone else must decide."
		default:
			d.CanDecide = true
		}
		return d, nil
	}
	v, aerr := h.runOf(ctx, p, runID, false)
	if aerr != nil {
		return nil, aerr
	}
	d.Run = v
	if de, err := h.lastDecision(ctx, v); err != nil {
		return nil, h.storeError("read decision", err)
	} else {
		d.Decided = de
	}
	return d, nil
}

// lastDecision is the decision on the run's last pause, if any.
func (h *Handler) lastDecision(ctx context.Context, v *runView) (*decisionEntry, error) {
	recs, err := h.stores.Records.List(ctx, decision.Filter{RunID: v.RunID})
	if err != nil {
		return nil, err
	}
	for i := len(recs) - 1; i >= 0; i-- {
		rec := recs[i]
		a := rec.Awaiting
		if rec.Status != decision.Deferred || a == nil {
			continue
		}
		raw, ok, err := h.ledger.get(ctx, decisionKey(rec.TenantID, rec.RunID, rec.RecordID, a.GateID, a.ToolCallID, a.ActionDigest))
		if err != nil || !ok {
			return nil, err
		}
		var de decisionEntry
		if err := json.Unmarshal(raw, &de); err != nil {
			return nil, err
		}
		de.Reason = h.redactText(de.Reason) // shown redacted, whatever the ledger holds
		return &de, nil
	}
	return nil, nil
}

// inboxDecide takes the decision form: the same rules as the API's
// decision, then back to the run's page.
func (h *Handler) inboxDecide(w http.ResponseWriter, r *http.Request) {
	r, p, cancel, ok := h.page(w, r)
	if !ok {
		return
	}
	defer cancel()
	r.Body = http.MaxBytesReader(w, r.Body, h.o.MaxBodyBytes)
	if err := r.ParseForm(); err != nil {
		h.pageError(w, p, errorf(http.StatusBadRequest, CodeInvalidRequest, "the form could not be read"))
		return
	}
	body := decisionBody{Decision: r.PostForm.Get("decision"), Reason: r.PostForm.Get("reason"), ActionDigest: r.PostForm.Get("action_digest")}
	if aerr := body.check(); aerr != nil {
		h.pageError(w, p, aerr)
		return
	}
	runID := r.PathValue("run_id")
	if _, aerr := h.decide(r.Context(), p, runID, r.PathValue("gate_id"), body); aerr != nil {
		h.pageError(w, p, aerr)
		return
	}
	http.Redirect(w, r, h.path("/inbox/runs/"+url.PathEscape(runID)+"?decided="+body.Decision), http.StatusSeeOther)
}

// inboxRecords shows the run's records and whether the chain verifies.
func (h *Handler) inboxRecords(w http.ResponseWriter, r *http.Request) {
	r, p, cancel, ok := h.page(w, r)
	if !ok {
		return
	}
	defer cancel()
	runID := r.PathValue("run_id")
	rep, aerr := h.verify(r.Context(), p, runID)
	if aerr != nil {
		h.pageError(w, p, aerr)
		return
	}
	recs, err := h.stores.Records.List(r.Context(), decision.Filter{RunID: runID, TenantID: p.TenantID})
	if err != nil {
		h.pageError(w, p, h.storeError("list records", err))
		return
	}
	h.render(w, http.StatusOK, "records", &pageData{Title: "Records of " + runID, Principal: p, RunID: runID, Records: recs, Chain: rep})
}

func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, http.StatusOK, "signin", &pageData{Title: "Sign in"})
}

// signin verifies the pasted token and keeps it in the session cookie.
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenBytes+1024)
	if err := r.ParseForm(); err != nil {
		h.pageError(w, nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "the form could not be read"))
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	probe := r.Clone(r.Context())
	probe.Header = http.Header{"Authorization": {"Bearer " + tok}}
	if _, aerr := h.authenticate(probe, false); aerr != nil {
		h.pageError(w, nil, aerr)
		return
	}
	http.SetCookie(w, h.cookie(r, tok, 0))
	http.Redirect(w, r, h.path("/inbox"), http.StatusSeeOther)
}

func (h *Handler) signout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, h.cookie(r, "", -1))
	http.Redirect(w, r, h.path("/inbox/signin"), http.StatusSeeOther)
}

// cookie is the session cookie: HttpOnly, SameSite=Strict, for the inbox
// pages only, and Secure unless the request is plain HTTP from loopback.
func (h *Handler) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") || !isLoopback(r.RemoteAddr)
	return &http.Cookie{Name: sessionCookie, Value: value, Path: h.path("/inbox"), HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode, MaxAge: maxAge}
}

func (h *Handler) stylesheet(w http.ResponseWriter, r *http.Request) {
	b, err := inboxFS.ReadFile("inbox/inbox.css")
	if err != nil {
		http.Error(w, "no stylesheet", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(b)
}
