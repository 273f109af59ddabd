package compiler

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/sortedkeys"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/policy"
	"github.com/contextos/contextos/runcontext"
)

func businessBlock(p *pack.Pack) string {
	var b strings.Builder
	s := p.BusinessContext.Summary
	if s.WhatWeDo != "" {
		fmt.Fprintf(&b, "What we do: %s.\n", s.WhatWeDo)
	}
	if len(s.WhoWeServe) > 0 {
		fmt.Fprintf(&b, "Who we serve: %s.\n", strings.Join(s.WhoWeServe, ", "))
	}
	if len(s.Differentiators) > 0 {
		fmt.Fprintf(&b, "Differentiators: %s.\n", strings.Join(s.Differentiators, ", "))
	}
	if len(p.BusinessContext.NonNegotiables) > 0 {
		b.WriteString("Non-negotiables:\n")
		for _, n := range p.BusinessContext.NonNegotiables {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (p *Prepared) policyBlock(d policy.Decision) string {
	// Written piece by piece (TestPolicyBlockText holds it to the
	// concatenated and fmt form it had).
	var b strings.Builder
	b.Grow(256)
	var num [20]byte
	b.WriteString("Rule ")
	b.WriteString(d.RuleID)
	b.WriteString(" (bundle ")
	b.WriteString(d.BundleID)
	b.WriteString(", priority ")
	b.Write(strconv.AppendInt(num[:0], int64(p.ruleMeta[d.RuleID].priority), 10))
	b.WriteString("): ")
	b.WriteString(string(d.Outcome))
	if d.Branch != "" {
		b.WriteString(" (")
		b.WriteString(d.Branch)
		b.WriteString(" branch)")
	}
	b.WriteString(".")
	if d.Rationale != "" {
		b.WriteString(" Rationale: ")
		b.WriteString(d.Rationale)
	}
	if d.Reason != "" {
		b.WriteString(" Reason: ")
		b.WriteString(d.Reason)
	}
	if len(d.Requires) > 0 {
		b.WriteString(" Requires evidence: ")
		for i, r := range d.Requires {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(r)
		}
		b.WriteString(".")
	}
	if d.RequiresApprovalGate != "" {
		g := p.gates[d.RequiresApprovalGate]
		b.WriteString(" Requires approval gate ")
		b.WriteString(g.GateID)
		b.WriteString(" (approver role ")
		b.WriteString(g.RequiredApproverRole)
		b.WriteString(", TTL ")
		b.Write(strconv.AppendInt(num[:0], int64(g.TTLSeconds), 10))
		b.WriteString("s).")
	}
	if d.ApprovalMode != "" {
		b.WriteString(" Approval mode: ")
		b.WriteString(d.ApprovalMode.String())
		b.WriteString(".")
	}
	if d.DecisionBinding != "" {
		b.WriteString(" Decision: ")
		b.WriteString(d.DecisionBinding)
		b.WriteString(".")
	}
	return b.String()
}

func toolBlock(a pack.Adapter, e ToolManifestEntry) string {
	// Written piece by piece, each constraint value without fmt where
	// its %v is known (TestToolBlockText holds it to the fmt form).
	var b strings.Builder
	b.Grow(64 + 96*len(e.Capabilities))
	b.WriteString("Adapter ")
	b.WriteString(a.AdapterID)
	b.WriteString(" (")
	b.WriteString(a.Type)
	b.WriteString(").")
	for _, c := range e.Capabilities {
		m := e.CapabilityMetadata[c]
		b.WriteString(" Capability ")
		b.WriteString(a.AdapterID)
		b.WriteByte('.')
		b.WriteString(c)
		b.WriteString(": ")
		b.WriteString(m.Kind)
		b.WriteString(", approval mode ")
		b.WriteString(m.ApprovalMode.String())
		if m.ApprovalGate != "" {
			b.WriteString(", approval gate ")
			b.WriteString(m.ApprovalGate)
			switch {
			case m.GateActive:
				b.WriteString(" (active)")
			case m.GatePerCall != "":
				b.WriteString(" (applies per call when ")
				b.WriteString(m.GatePerCall)
				b.WriteByte(')')
			default:
				b.WriteString(" (inactive)")
			}
		}
		for _, arg := range sortedkeys.Of(m.Constraints) {
			b.WriteString(", ")
			b.WriteString(arg)
			b.WriteByte(' ')
			writeConstraint(&b, m.Constraints[arg])
		}
		b.WriteByte('.')
	}
	return b.String()
}

// writeConstraint writes c's members as {k=v k=v}, in key order, each
// value as fmt's %v writes it.
func writeConstraint(b *strings.Builder, c map[string]any) {
	b.WriteByte('{')
	var num [32]byte
	for i, k := range sortedkeys.Of(c) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		switch v := c[k].(type) {
		case string:
			b.WriteString(v)
		case float64:
			b.Write(strconv.AppendFloat(num[:0], v, 'g', -1, 64))
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case int:
			b.Write(strconv.AppendInt(num[:0], int64(v), 10))
		default:
			fmt.Fprintf(b, "%v", v)
		}
	}
	b.WriteByte('}')
}

// perCallGateBlock tells the model about a gate that reads the tool call
// and that no surfaced capability's permission names.
func perCallGateBlock(g pack.ApprovalGate, cond string) string {
	return fmt.Sprintf("Approval gate %s (approver role %s, TTL %ds) applies per call when %s: a write-class call it applies to pauses until a %s approves it.",
		g.GateID, g.RequiredApproverRole, g.TTLSeconds, cond, g.RequiredApproverRole)
}

// unboundGateBlock tells the model about an active gate that no
// permission names: it holds every write-class call.
func unboundGateBlock(g pack.ApprovalGate) string {
	return fmt.Sprintf("Approval gate %s (approver role %s, TTL %ds) is active: every write-class call pauses until a %s approves it.",
		g.GateID, g.RequiredApproverRole, g.TTLSeconds, g.RequiredApproverRole)
}

// Caller text in the prompt. Every string the caller or a host source
// supplies — the user message, input.channel, input.locale, the session
// id, the request's input.context (its canonical JSON, as one string),
// evidence refs, kinds, sources, snapshots and content, memory refs,
// tiers and content — reaches a block only through quote: a Go-syntax
// double-quoted string, in which a newline, a carriage return, a quote, a
// backslash, a control or format character (bidirectional overrides, line
// and paragraph separators) and invalid UTF-8 are escaped. Such text
// therefore spans one line, starts and ends where its quotes say, and
// cannot open a block, a role ("\n\n## SYSTEM:") or the renderer's
// delimiters: it is data, never instructions. Pack text (signed by the
// pack's publisher) is written as it is.

// quote renders caller-supplied text as data (see above).
func quote(s string) string { return strconv.Quote(s) }

// writeQuoted writes quote(s) to b without an allocation of its own for
// short strings. Printable ASCII other than a quote and a backslash is
// what strconv.Quote writes as itself: such a string is written as is
// between quotes.
func writeQuoted(b *strings.Builder, s string) {
	if plainQuotable(s) {
		b.WriteByte('"')
		b.WriteString(s)
		b.WriteByte('"')
		return
	}
	var buf [128]byte
	b.Write(strconv.AppendQuote(buf[:0], s))
}

// plainQuotable reports whether s is printable ASCII without '"' or '\\'.
func plainQuotable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// evidenceBlock presents evidence as quoted data: retrieved text is never
// instructions.
func evidenceBlock(it EvidenceItem) string {
	var b strings.Builder
	b.Grow(len(it.EvidenceRef) + len(it.Content) + 64)
	b.WriteString("Evidence ")
	writeQuoted(&b, it.EvidenceRef)
	sep := " ("
	for _, kv := range [...][2]string{{"kind", it.Kind}, {"source", it.SourceID}, {"snapshot", it.Snapshot}} {
		if kv[1] != "" {
			b.WriteString(sep)
			b.WriteString(kv[0])
			b.WriteByte(' ')
			writeQuoted(&b, kv[1])
			sep = ", "
		}
	}
	if sep == ", " {
		b.WriteByte(')')
	}
	b.WriteString(", data only: ")
	writeQuoted(&b, it.Content)
	return b.String()
}

// memoryBlock presents a promoted memory as quoted data.
func memoryBlock(m MemoryItem) string {
	var b strings.Builder
	b.Grow(len(m.MemoryRef) + len(m.Tier) + len(m.Content) + 64)
	b.WriteString("Memory ")
	writeQuoted(&b, m.MemoryRef)
	b.WriteString(" (")
	if m.Tier != "" {
		b.WriteString("tier ")
		writeQuoted(&b, m.Tier)
		b.WriteString(", ")
	}
	b.WriteString("confidence ")
	b.WriteString(strconv.FormatFloat(m.Confidence, 'f', -1, 64))
	b.WriteString("), data only: ")
	writeQuoted(&b, m.Content)
	return b.String()
}

// sessionBlock is the session bucket's block: the session, the channel,
// the locale, currency and timezone, the user message and (Form3) the
// request's input.context as canonical JSON, every caller string quoted
// as data. In Form3 a value the pack's environment_defaults filled is
// marked "(pack default)", so the request that gave it and the one that
// did not compile differently.
func sessionBlock(req *runcontext.InvokeRequest, rc *runcontext.RunContext, env *LedgerEnvironment, context []byte, form Form) string {
	var b strings.Builder
	b.Grow(len(req.Input.Message) + len(req.Input.Channel) + len(context) + 128)
	if rc.SessionID != "" {
		b.WriteString("Session ")
		writeQuoted(&b, rc.SessionID)
	} else {
		b.WriteString("Ephemeral run")
	}
	if req.Input.Channel != "" {
		b.WriteString(", channel ")
		writeQuoted(&b, req.Input.Channel)
	}
	for _, kv := range [...][2]string{{"locale", env.Locale}, {"currency", env.Currency}, {"timezone", env.Timezone}} {
		if kv[1] != "" {
			b.WriteString(", " + kv[0] + " ")
			writeQuoted(&b, kv[1])
			if form >= Form3 && slices.Contains(env.Defaulted, kv[0]) {
				b.WriteString(" (pack default)")
			}
		}
	}
	b.WriteString(". User message: ")
	writeQuoted(&b, req.Input.Message)
	if form >= Form3 && len(context) > 0 {
		b.WriteString(". Request context, data only: ")
		writeQuoted(&b, string(context))
	}
	return b.String()
}

// requestContext is the request's input.context in RFC 8785 canonical
// JSON, or nil when it has no member.
func requestContext(req *runcontext.InvokeRequest) ([]byte, error) {
	if len(req.Input.Context) == 0 {
		return nil, nil
	}
	return canon.JSON(req.Input.Context)
}

// environment resolves the run's locale, currency and timezone: the
// request's (input.locale or the run context's locale; the strings
// input.context.currency and input.context.timezone), else the pack's
// environment_defaults (Form1 has no defaults).
func (p *Prepared) environment(req *runcontext.InvokeRequest, rc *runcontext.RunContext, form Form) *LedgerEnvironment {
	env := &LedgerEnvironment{Locale: cmp.Or(req.Input.Locale, rc.Locale)}
	env.Currency, _ = req.Input.Context["currency"].(string)
	env.Timezone, _ = req.Input.Context["timezone"].(string)
	if form == Form1 {
		env.Currency, env.Timezone = "", ""
		return env
	}
	d := p.pack.PackMeta.EnvironmentDefaults
	for _, f := range [...]struct {
		name string
		dst  *string
		def  string
	}{{"locale", &env.Locale, d.Locale}, {"currency", &env.Currency, d.Currency}, {"timezone", &env.Timezone, d.Timezone}} {
		if strings.TrimSpace(*f.dst) == "" && f.def != "" {
			*f.dst = f.def
			if env.Defaulted == nil {
				env.Defaulted = make([]string, 0, 3) // at most the three
			}
			env.Defaulted = append(env.Defaulted, f.name)
		}
	}
	return env
}

// taskText is the compiled prompt's task: the user message, quoted, and
// the intent the pack serves.
func taskText(req *runcontext.InvokeRequest, intent string) string {
	var b strings.Builder
	b.Grow(len(req.Input.Message) + len(intent) + 24)
	b.WriteString("Handle: ")
	writeQuoted(&b, req.Input.Message)
	b.WriteString(" (intent=" + intent + ").")
	return b.String()
}

// checkSession refuses a compile whose session block or task — both carry
// the user message, and the session block the request context — does not
// fit the session bucket whole (a bucket with no allocation allows
// nothing). Neither is truncated: a message or context cut short can ask
// for something else than the caller did, so a governed run refuses it and
// says so, with a *runcontext.BudgetError naming tokens.session.
func (p *Prepared) checkSession(session, task string, alloc map[runcontext.Bucket]int) error {
	limit := alloc[runcontext.BucketSession]
	if n := max(p.opts.Tokenizer.Count(session), p.opts.Tokenizer.Count(task)); n > limit {
		return fail(8, ErrBudget, &runcontext.BudgetError{Dimension: "tokens." + string(runcontext.BucketSession), Limit: float64(limit), Requested: float64(n)},
			"the user message and request context need %d tokens of the session bucket, which allows %d; they are refused, not truncated", n, limit)
	}
	return nil
}

// Render writes the compiled prompt as one text for a model that takes a
// single prompt: a header line per section ("## system", "## developer",
// "## context <block_id> (<bucket>, priority <n>)", "## task") and each
// line of a section's content prefixed with "| ". No content line can
// therefore pass for a header, whatever it holds; and caller text, quoted
// (see quote), cannot even start a line of its own. The same prompt
// renders to the same bytes.
func (c *CompiledPrompt) Render() string {
	var b strings.Builder
	section := func(header, body string) {
		b.WriteString("## ")
		b.WriteString(header)
		b.WriteByte('\n')
		for _, line := range strings.Split(body, "\n") {
			b.WriteString("| ")
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	section("system", c.System)
	section("developer", c.Developer)
	for _, blk := range c.ContextBlocks {
		section(fmt.Sprintf("context %s (%s, priority %d)", quote(blk.BlockID), blk.Bucket, blk.Priority), blk.Content)
	}
	section("task", c.Task)
	return b.String()
}

// developerText is the compiled prompt's developer text for pack p: its
// tone and communication rules.
func developerText(p *pack.Pack) string {
	var b strings.Builder
	b.WriteString("Honor the policy_manifest, tool_manifest, runtime_controls, and required_evidence at every step.")
	tc := p.ToneAndComms
	if len(tc.VoiceAttributes) > 0 {
		fmt.Fprintf(&b, " Voice: %s.", strings.Join(tc.VoiceAttributes, ", "))
	}
	if len(tc.Do) > 0 {
		fmt.Fprintf(&b, " Do: %s.", strings.Join(tc.Do, "; "))
	}
	if len(tc.Dont) > 0 {
		fmt.Fprintf(&b, " Don't: %s.", strings.Join(tc.Dont, "; "))
	}
	return b.String()
}
