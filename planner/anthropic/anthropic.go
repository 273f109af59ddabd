// Package anthropic owns the ContextOS planner that plans with a Claude
// model behind Anthropic's Messages API.
//
// Each turn renders the run's PlanRequest into a provider-neutral
// planner.Conversation (planner.Render), sends it as a Messages request
// with tools (one per surfaced capability, and propose_decision), turns
// the answer into a planner.Response (text, tool calls in order, stop
// reason, refusal, token usage and its cost) and returns the plan the
// conversation parses from it. With Options.Stream the answer is
// streamed: text and tool-call fragments reach the run's stream consumers
// as plan_delta events, and the plan is the one the batch call would have
// made from the same answer.
//
// Prompt caching: the system prompt and the run's context message (the
// stable prefix of every turn of a run) carry cache_control breakpoints,
// so the turns after the first read them from Anthropic's prompt cache.
// Cache reads and writes are part of the turn's input tokens and are
// priced apart (planner.Price).
//
// Retries (429, 408, 409, 5xx, connection errors) are the SDK's own,
// which honours Retry-After and Retry-After-Ms; the run's plan timeout
// bounds them all.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/internal/provider"
)

// Environment variables New reads (through Options.Getenv) for options
// left empty.
const (
	// EnvAPIKey holds the API key when Options.APIKey is empty.
	EnvAPIKey = "ANTHROPIC_API_KEY"
	// EnvBaseURL holds the API's base URL when Options.BaseURL is empty.
	EnvBaseURL = "ANTHROPIC_BASE_URL"
)

// DefaultMaxTokens is the answer limit when Options.MaxTokens is 0 (the
// Messages API requires one).
const DefaultMaxTokens = 4096

// ErrConfig is the error New returns for invalid Options; the message
// names the option.
var ErrConfig = errors.New("anthropic: invalid options")

// errNoMessage is a successful call whose body is no message.
var errNoMessage = errors.New("anthropic: messages: the API answered without a message")

// Options configures a Planner.
type Options struct {
	// Model is the model to plan with ("claude-sonnet-4-5"). Required.
	Model string
	// APIKey is sent in the x-api-key header. Default: the
	// ANTHROPIC_API_KEY environment variable; one of them is required.
	APIKey string
	// BaseURL is the API's base URL (a proxy or gateway). Default: the
	// ANTHROPIC_BASE_URL environment variable, else the SDK's
	// https://api.anthropic.com/.
	BaseURL string
	// Temperature is the sampling temperature, in [0, 1]; nil leaves the
	// model's default.
	Temperature *float64
	// MaxTokens bounds the tokens of each answer (max_tokens). 0 is
	// DefaultMaxTokens. An answer cut off at the limit is not acted on:
	// the planner is asked again. Without Stream and RequestTimeout the
	// SDK refuses a limit it expects to take over 10 minutes (about
	// 21,000 tokens), and New says so.
	MaxTokens int
	// Prices prices each turn's usage, keyed by Model. A model without a
	// price costs 0: its turns charge tokens but no cost to the run
	// budget.
	Prices map[string]planner.Price
	// MaxRetries is how often the SDK retries a failed request (429, 408,
	// 409, 5xx, a connection error), waiting as Retry-After says or
	// backing off. 0 keeps the SDK's default (2); a negative value turns
	// retries off.
	MaxRetries int
	// RequestTimeout bounds each attempt (the SDK's per-request timeout);
	// 0 leaves the SDK's (10 minutes for a batch call, none for a stream)
	// under the run's plan timeout, which bounds all attempts.
	RequestTimeout time.Duration
	// MaxResponseBytes bounds each response body the planner reads (an
	// answer, an error reply, a whole stream): a longer one fails the
	// turn with an error matching planner.ErrResponseTooLarge. 0 is
	// planner.DefaultMaxResponseBytes (8 MiB); negative is invalid.
	MaxResponseBytes int64
	// HTTPClient sends the requests (a proxy, a test transport); nil is
	// http.DefaultClient.
	HTTPClient *http.Client
	// Render tunes how a PlanRequest becomes a conversation.
	Render planner.Options
	// Stream streams each answer, emitting its text and tool-call
	// fragments as plan deltas (PlanRequest.Emit).
	Stream bool
	// Getenv reads the environment variables; nil is os.Getenv. The SDK's
	// own reading of the environment (credentials, profiles, base URL) is
	// turned off: only these options and Getenv configure the client.
	Getenv func(string) string
}

// Planner is a contextos.Planner backed by the Messages API. It is safe
// for concurrent use.
type Planner struct {
	opts     Options
	price    planner.Price
	priced   bool
	messages anthropic.MessageService
}

// New returns a Planner for opts, or an error wrapping ErrConfig that
// names the invalid option.
func New(opts Options) (*Planner, error) {
	if opts.Model == "" {
		return nil, fmt.Errorf("%w: Model is required", ErrConfig)
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if opts.APIKey == "" {
		opts.APIKey = getenv(EnvAPIKey)
	}
	if opts.APIKey == "" {
		return nil, fmt.Errorf("%w: APIKey is required (set Options.APIKey or %s)", ErrConfig, EnvAPIKey)
	}
	if opts.BaseURL == "" {
		opts.BaseURL = getenv(EnvBaseURL)
	}
	if err := provider.BaseURL(opts.BaseURL); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if t := opts.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 1) {
		return nil, fmt.Errorf("%w: Temperature must be in [0, 1]", ErrConfig)
	}
	switch {
	case opts.MaxTokens < 0:
		return nil, fmt.Errorf("%w: MaxTokens must not be negative", ErrConfig)
	case opts.MaxTokens == 0:
		opts.MaxTokens = DefaultMaxTokens
	}
	if opts.RequestTimeout < 0 {
		return nil, fmt.Errorf("%w: RequestTimeout must not be negative", ErrConfig)
	}
	if !opts.Stream && opts.RequestTimeout == 0 {
		if _, err := anthropic.CalculateNonStreamingTimeout(opts.MaxTokens, anthropic.Model(opts.Model), nil); err != nil {
			return nil, fmt.Errorf("%w: MaxTokens %d needs Stream or a RequestTimeout (the SDK expects a batch call to take over 10 minutes)", ErrConfig, opts.MaxTokens)
		}
	}
	if model, err := provider.Prices(opts.Prices); err != nil {
		return nil, fmt.Errorf("%w: Prices[%q]: %w", ErrConfig, model, err)
	}
	maxBody, err := provider.MaxResponseBytes(opts.MaxResponseBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	p := &Planner{opts: opts}
	p.price, p.priced = opts.Prices[opts.Model]

	// WithoutEnvironmentDefaults: anthropic.NewClient would otherwise read
	// ANTHROPIC_* variables and profile files of the process, which
	// Options.Getenv replaces.
	ro := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithAPIKey(opts.APIKey)}
	if opts.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	ro = append(ro, option.WithMiddleware(provider.LimitBody(maxBody)))
	switch {
	case opts.MaxRetries < 0:
		ro = append(ro, option.WithMaxRetries(0))
	case opts.MaxRetries > 0:
		ro = append(ro, option.WithMaxRetries(opts.MaxRetries))
	}
	if opts.RequestTimeout > 0 {
		ro = append(ro, option.WithRequestTimeout(opts.RequestTimeout))
	}
	p.messages = anthropic.NewClient(ro...).Messages
	return p, nil
}

// Plan asks the model for the next plan of the run: it renders req, calls
// the API (streaming when Options.Stream) and returns the plan the
// conversation parses from the answer. An answer the runtime cannot act
// on (cut off, refused, text only, malformed arguments) is a plan with
// Replan set. A failed call returns an error that errors.As matches
// against *anthropic.Error (an API error status, or an error event in a
// stream), a *contextos.PlanUsageError with the usage a stream reported
// before it failed, when it did; an answer without usage (a message, or
// a stream's message_start or message_delta, without its usage member)
// returns an error matching contextos.ErrUsageUnknown; its message names the status and the error type, never the
// key nor the server's text. When ctx ends first, the error is ctx's.
func (p *Planner) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	conv, err := planner.Render(req, &p.opts.Render)
	if err != nil {
		return nil, fmt.Errorf("anthropic: render: %w", err)
	}
	params, err := p.params(conv)
	if err != nil {
		return nil, err
	}
	var resp *planner.Response
	if p.opts.Stream {
		resp, err = p.stream(ctx, req, conv, params)
	} else {
		resp, err = p.batch(ctx, params)
	}
	if err != nil {
		return nil, err
	}
	return conv.Parse(resp), nil
}

// batch makes one Messages call.
func (p *Planner) batch(ctx context.Context, params anthropic.MessageNewParams) (*planner.Response, error) {
	msg, err := p.messages.New(ctx, params)
	if err != nil {
		return nil, callError(ctx, err)
	}
	if msg == nil { // a body of null
		return nil, errNoMessage
	}
	if !msg.JSON.Usage.Valid() {
		return nil, errNoUsage
	}
	return p.response(msg, nil), nil
}

// errNoUsage is an answer without its usage: the turn fails closed rather
// than charging the run nothing for it.
var errNoUsage = fmt.Errorf("anthropic: messages: the answer reports no usage: %w", contextos.ErrUsageUnknown)

// callError wraps a failed call's error. The context's own error is
// returned as is, so the runtime tells a plan timeout from a failure.
func callError(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	return &apiError{err: err}
}

// apiError is a failed API call. Its message names the status, the
// request id and the API's error type, not the body's text (which the
// SDK's own message quotes); Unwrap gives the SDK's error.
type apiError struct{ err error }

func (e *apiError) Error() string {
	var ae *anthropic.Error
	if errors.As(e.err, &ae) {
		msg := "anthropic: messages: "
		if ae.StatusCode >= 400 {
			msg += fmt.Sprintf("status %d %s", ae.StatusCode, http.StatusText(ae.StatusCode))
		} else {
			msg += "the stream reported an error event"
		}
		// Only identifier words of the reply are repeated: a server can
		// put a key it was sent into any of its text (provider.Word).
		if t := provider.Word(string(ae.Type()), 40, true); t != "" {
			msg += fmt.Sprintf(" (type %q)", t)
		}
		if id := provider.Word(ae.RequestID, 64, false); id != "" {
			msg += fmt.Sprintf(" (request-id %q)", id)
		}
		return msg
	}
	if strings.HasPrefix(e.err.Error(), "received error while streaming") {
		// The SDK quotes an error event it could not decode.
		return "anthropic: messages: the stream reported an error event"
	}
	return "anthropic: messages: " + e.err.Error()
}

func (e *apiError) Unwrap() error { return e.err }

// PlannerModel implements contextos.PlannerModel: its turns' GenAI spans
// and metrics name the provider "anthropic" and the model asked for.
func (p *Planner) PlannerModel() (provider, model string) { return "anthropic", p.opts.Model }

var _ contextos.PlannerModel = (*Planner)(nil)
