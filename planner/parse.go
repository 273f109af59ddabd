package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/internal/jsonv"
	"github.com/contextos/contextos/internal/wire"
)

// MaxToolNameBytes bounds the name of a tool call Parse takes: a longer
// name, or one that is not valid UTF-8, makes the turn a replan.
const MaxToolNameBytes = 128

// maxErrorBytes bounds a JSON parse error quoted in a replan reason.
const maxErrorBytes = 160

// Replan reasons' prefixes, as Parse writes them into Plan.Replan.
const (
	// ReplanLength: the answer was cut off at the token limit.
	ReplanLength = "length_limit"
	// ReplanRefused: the model or the provider's filter refused.
	ReplanRefused = "model_refused"
	// ReplanMalformed: a tool call's name or arguments cannot be taken.
	ReplanMalformed = "malformed_tool_call"
	// ReplanNoToolCall: the model answered in text only.
	ReplanNoToolCall = "no_tool_call"
)

// Parse makes the plan of a model's answer to c. It never fails: an answer
// that cannot be a plan — cut off at the length limit (even with calls),
// refused, without a tool call, with a malformed call or two decisions —
// is a plan with only a Replan reason, which never quotes the model's
// text. The usage is always copied (Tokens is InputTokens+OutputTokens
// when the response leaves it 0).
//
// A call of the DecisionTool is the plan's decision; every other call is a
// step of the capability c maps its name to, or of the name itself when c
// has no such tool (the critic refuses a capability the run does not
// surface). Arguments are decoded with json.Number for numbers, so
// integers stay exact.
func (c *Conversation) Parse(resp *Response) *contextos.Plan {
	if resp == nil {
		return &contextos.Plan{Replan: ReplanNoToolCall + ": the provider returned no answer"}
	}
	plan := &contextos.Plan{Usage: resp.Usage}
	if plan.Usage.Tokens == 0 && resp.Usage.InputTokens >= 0 && resp.Usage.OutputTokens >= 0 {
		// Saturating: a hostile count cannot wrap to a small charge.
		plan.Usage.Tokens = resp.Usage.InputTokens + min(resp.Usage.OutputTokens, math.MaxInt-resp.Usage.InputTokens)
	}
	replan := func(reason string) *contextos.Plan {
		return &contextos.Plan{Usage: plan.Usage, Replan: reason}
	}
	switch {
	case resp.Stop == StopLength:
		return replan(fmt.Sprintf("%s: the answer was cut off at the model's output token limit (%d tool calls came back, none taken); answer with fewer or shorter calls", ReplanLength, len(resp.ToolCalls)))
	case resp.Stop == StopRefusal || resp.Refusal != "":
		return replan(ReplanRefused + ": the model refused to answer this turn")
	case len(resp.ToolCalls) == 0:
		return replan(ReplanNoToolCall + ": the model answered in text without calling a tool; act by calling a tool, or decide with " + DecisionTool)
	}
	for i, call := range resp.ToolCalls {
		switch {
		case call.Name == "":
			return replan(fmt.Sprintf("%s: tool call %d has no name", ReplanMalformed, i))
		case len(call.Name) > MaxToolNameBytes || !utf8.ValidString(call.Name):
			return replan(fmt.Sprintf("%s: tool call %d has a name that is not valid UTF-8 or longer than %d bytes", ReplanMalformed, i, MaxToolNameBytes))
		}
		if call.Name == DecisionTool {
			if plan.Decision != nil {
				return replan(fmt.Sprintf("%s: the answer proposes more than one decision (tool call %d); propose one", ReplanMalformed, i))
			}
			d, err := decodeDecision(call.Arguments)
			if err != nil {
				return replan(fmt.Sprintf("%s: the arguments of tool call %d (%s) %s", ReplanMalformed, i, DecisionTool, err))
			}
			plan.Decision = d
			continue
		}
		args, err := decodeArgs(call.Arguments)
		if err != nil {
			// Only a name of the conversation's own tools is quoted: the
			// reason reaches the record, and a model's text must not.
			name := "an unknown tool"
			if _, ok := c.Capability(call.Name); ok {
				name = strconv.Quote(call.Name)
			}
			return replan(fmt.Sprintf("%s: the arguments of tool call %d (%s) %s", ReplanMalformed, i, name, err))
		}
		id, ok := c.Capability(call.Name)
		if !ok {
			id = call.Name
		}
		plan.Steps = append(plan.Steps, contextos.Step{CapabilityID: id, Args: args})
	}
	return plan
}

// argsError says why a call's arguments cannot be taken, without quoting
// them.
type argsError struct{ why string }

func (e *argsError) Error() string { return e.why }

// errNotFinite: the runtime refuses a plan whose numbers have no
// float64 form, as a planner failure that ends the run; a model's answer
// is a replan instead.
var errNotFinite = &argsError{fmt.Sprintf("hold a number out of range or are nested deeper than %d levels", jsonv.MaxDepth)}

// decodeArgs decodes a call's arguments: a JSON object ("" is {}), its
// numbers json.Number.
func decodeArgs(text string) (map[string]any, error) {
	if strings.TrimSpace(text) == "" {
		return map[string]any{}, nil
	}
	var v any
	if err := decodeStrict(text, &v, false); err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &argsError{"are not a JSON object"}
	}
	if !jsonv.Finite(m) {
		return nil, errNotFinite
	}
	if err := strictText(text); err != nil {
		return nil, err
	}
	return m, nil
}

// errNotStrict: arguments encoding/json reads only by dropping something
// (wire.CheckStrict): a member named twice keeps its last value, so a
// stream consumer reading the text would see another call than the one
// run; an invalid string becomes U+FFFD.
var errNotStrict = &argsError{"are not a JSON object: a member is named twice, or a string is not valid UTF-8"}

// strictText refuses arguments wire.CheckStrict refuses; what it found is
// not quoted (a member name is the model's text).
func strictText(text string) error {
	if len(wire.CheckStrict([]byte(text))) > 0 {
		return errNotStrict
	}
	return nil
}

// decisionFields are the DecisionTool's member names, exactly:
// encoding/json would match "OUTCOME" to outcome.
var decisionFields = map[string]bool{"decision_key": true, "outcome": true, "outputs": true, "rationale": true,
	"confidence": true, "evidence_refs": true, "subject_ids": true}

// decisionArgs is the DecisionTool's arguments.
type decisionArgs struct {
	DecisionKey  string         `json:"decision_key"`
	Outcome      string         `json:"outcome"`
	Outputs      map[string]any `json:"outputs"`
	Rationale    string         `json:"rationale"`
	Confidence   float64        `json:"confidence"`
	EvidenceRefs []string       `json:"evidence_refs"`
	SubjectIDs   []string       `json:"subject_ids"`
}

// decodeDecision decodes a DecisionTool call: known fields only,
// decision_key and outcome required.
func decodeDecision(text string) (*contextos.DecisionProposal, error) {
	if strings.TrimSpace(text) == "" {
		text = "{}"
	}
	var a decisionArgs
	if err := decodeStrict(text, &a, true); err != nil {
		return nil, err
	}
	switch {
	case !jsonv.Finite(a.Outputs):
		return nil, errNotFinite
	case a.DecisionKey == "":
		return nil, &argsError{"have no decision_key"}
	case a.Outcome == "":
		return nil, &argsError{"have no outcome"}
	case a.Confidence < 0 || a.Confidence > 1:
		return nil, &argsError{"have a confidence outside 0 to 1"}
	}
	if err := strictText(text); err != nil {
		return nil, err
	}
	// The text is one valid JSON object (decodeStrict): its members'
	// names are split out without decoding it again.
	members, ok := topLevel([]byte(strings.TrimSpace(text)))
	if !ok {
		return nil, &argsError{"are not a JSON object"}
	}
	for _, m := range members {
		if !decisionFields[m.key] {
			// Only a case variant of a known field gets here (unknown
			// fields are refused by the decoder); it is not quoted.
			return nil, &argsError{"are not a JSON object: a field's name differs in letter case from the tool's schema"}
		}
	}
	return &contextos.DecisionProposal{DecisionKey: a.DecisionKey, Outcome: a.Outcome, Outputs: a.Outputs, Rationale: a.Rationale,
		Confidence: a.Confidence, SubjectIDs: a.SubjectIDs, EvidenceRefs: a.EvidenceRefs}, nil
}

// decodeStrict decodes exactly one JSON value of text into v, numbers as
// json.Number, unknown fields refused when strict. The error is bounded
// and quotes none of the text but a field name.
func decodeStrict(text string, v any, strict bool) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return &argsError{"are not a JSON object: " + jsonError(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &argsError{"are not a JSON object: data after the object"}
	}
	return nil
}

// jsonError is a decoding error's text, bounded.
func jsonError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("%s (at byte %d)", cutUTF8(strings.TrimPrefix(syn.Error(), "json: "), maxErrorBytes), syn.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(document)"
		}
		return fmt.Sprintf("%s is a JSON %s, want %s", cutUTF8(field, 64), typ.Value, typ.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of JSON input"
	}
	if strings.HasPrefix(strings.TrimPrefix(err.Error(), "json: "), "unknown field") {
		// The field's name is the model's text: it is not quoted.
		return "a field the tool's schema does not list"
	}
	return "a value that does not decode"
}
