// Package openai owns the ContextOS planner that plans with a model behind
// the OpenAI Chat Completions API: OpenAI itself or an OpenAI-compatible
// server (vLLM, Ollama, LM Studio) at Options.BaseURL.
//
// Each turn renders the run's PlanRequest into a provider-neutral
// planner.Conversation (planner.Render), sends it as a chat completion
// with function tools (one per surfaced capability, and propose_decision),
// turns the answer into a planner.Response (text, tool calls in order,
// stop reason, refusal, token usage and its cost) and returns the plan
// the conversation parses from it. With Options.Stream the answer is
// streamed: text and tool-call fragments reach the run's stream consumers
// as plan_delta events, and the plan is the one the batch call would
// have made from the same answer.
//
// Retries (429, 408, 409, 5xx, connection errors) are the SDK's own,
// which honours Retry-After and Retry-After-Ms; the run's plan timeout
// bounds them all.
package openai

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/planner"
	"github.com/contextos/contextos/planner/internal/provider"
)

// Environment variables New reads (through Options.Getenv) for options
// left empty.
const (
	// EnvAPIKey holds the API key when Options.APIKey is empty.
	EnvAPIKey = "OPENAI_API_KEY"
	// EnvBaseURL holds the API's base URL when Options.BaseURL is empty.
	EnvBaseURL = "OPENAI_BASE_URL"
)

// ErrConfig is the error New returns for invalid Options; the message
// names the option.
var ErrConfig = errors.New("openai: invalid options")

// Options configures a Planner.
type Options struct {
	// Model is the model to plan with ("gpt-4.1", or the model name an
	// OpenAI-compatible server serves). Required.
	Model string
	// APIKey is sent as a bearer token. Default: the OPENAI_API_KEY
	// environment variable. It may be empty only when a base URL is set
	// (a local compatible server needs none).
	APIKey string
	// BaseURL is the API's base URL ("http://localhost:11434/v1/" for
	// Ollama). Default: the OPENAI_BASE_URL environment variable, else
	// OpenAI's https://api.openai.com/v1/.
	BaseURL string
	// Temperature is the sampling temperature, in [0, 2]; nil leaves the
	// model's default.
	Temperature *float64
	// MaxTokens bounds the tokens of each answer (sent as
	// max_completion_tokens); 0 leaves the model's limit. An answer cut off
	// at the limit is not acted on: the planner is asked again.
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
	// RequestTimeout bounds each attempt (the SDK's per-request timeout;
	// an attempt that times out is not retried); 0 leaves only the run's
	// plan timeout, which bounds all attempts.
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
	// Getenv reads the environment variables; nil is os.Getenv.
	Getenv func(string) string
}

// Planner is a contextos.Planner backed by the Chat Completions API. It is
// safe for concurrent use.
type Planner struct {
	opts    Options
	price   planner.Price
	priced  bool
	service openai.ChatCompletionService
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
	if opts.BaseURL == "" {
		opts.BaseURL = getenv(EnvBaseURL)
	}
	if opts.APIKey == "" && opts.BaseURL == "" {
		return nil, fmt.Errorf("%w: APIKey is required (set Options.APIKey or %s) unless a base URL is set", ErrConfig, EnvAPIKey)
	}
	if err := provider.BaseURL(opts.BaseURL); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if t := opts.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		return nil, fmt.Errorf("%w: Temperature must be in [0, 2]", ErrConfig)
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("%w: MaxTokens must not be negative", ErrConfig)
	}
	if opts.RequestTimeout < 0 {
		return nil, fmt.Errorf("%w: RequestTimeout must not be negative", ErrConfig)
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

	// The service is built from these options alone: openai.NewClient
	// would also read OPENAI_* variables from the process environment,
	// which Options.Getenv replaces.
	ro := []option.RequestOption{option.WithEnvironmentProduction()}
	if opts.BaseURL != "" {
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	if opts.APIKey != "" {
		ro = append(ro, option.WithAPIKey(opts.APIKey))
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
	p.service = openai.NewChatCompletionService(ro...)
	return p, nil
}

// Plan asks the model for the next plan of the run: it renders req, calls
// the API (streaming when Options.Stream) and returns the plan the
// conversation parses from the answer. An answer the runtime cannot act
// on (cut off, refused, text only, malformed arguments) is a plan with
// Replan set. A failed call, or a stream that ends before the answer's
// finish reason, returns an error (a *contextos.PlanUsageError with the
// usage the server reported for the turn, when it did); an answer
// without usage (a server that ignores stream_options.include_usage)
// returns an error matching contextos.ErrUsageUnknown; errors.As matches an API error status
// against the SDK's *openai.Error and an error event in a stream against
// *ssestream.StreamError. The error's message names no key and quotes
// none of the server's text (an OpenAI 401 message quotes part of the
// key).
func (p *Planner) Plan(ctx context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	conv, err := planner.Render(req, &p.opts.Render)
	if err != nil {
		return nil, fmt.Errorf("openai: render: %w", err)
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

// batch makes one chat completion.
func (p *Planner) batch(ctx context.Context, params openai.ChatCompletionNewParams) (*planner.Response, error) {
	cc, err := p.service.New(ctx, params)
	if err != nil {
		return nil, callError(ctx, err)
	}
	if cc == nil {
		return nil, errors.New("openai: chat completion: the API answered null")
	}
	if !cc.JSON.Usage.Valid() {
		return nil, errNoUsage
	}
	return p.response(cc), nil
}

// errNoUsage is an answer without its usage: the turn fails closed
// rather than charging the run nothing for it.
var errNoUsage = fmt.Errorf("openai: chat completion: the answer reports no usage: %w", contextos.ErrUsageUnknown)

// failed is err with the usage the server reported for the turn, which
// the runtime charges (nil u: none was reported).
func (p *Planner) failed(err error, u *openai.CompletionUsage) error {
	if u == nil {
		return err
	}
	return &contextos.PlanUsageError{Usage: p.usage(*u), Err: err}
}

// callError wraps a failed call's error. The context's own error is
// returned as is, so the runtime tells a plan timeout from a failure.
func callError(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	return &apiError{err: err}
}

// apiError is a failed API call. Its message is the SDK error's own for
// an API status (which carries the status only) and a fixed text for an
// error event in a stream (whose server text may quote a key); Unwrap
// gives the SDK's error.
type apiError struct{ err error }

func (e *apiError) Error() string {
	var ae *openai.Error
	if errors.As(e.err, &ae) {
		msg := "openai: chat completion: " + ae.Error()
		// Only identifier words of the reply are repeated: a server can
		// put a key it was sent into any of its text (provider.Word).
		if typ, code := provider.Word(ae.Type, 40, true), provider.Word(ae.Code, 40, true); typ != "" || code != "" {
			msg += fmt.Sprintf(" (type %q, code %q)", typ, code)
		}
		return msg
	}
	if isStreamError(e.err) {
		return "openai: chat completion: the stream reported an error event"
	}
	return "openai: chat completion: " + e.err.Error()
}

func (e *apiError) Unwrap() error { return e.err }

// PlannerModel implements contextos.PlannerModel: its turns' GenAI spans
// and metrics name the provider "openai" and the model asked for.
func (p *Planner) PlannerModel() (provider, model string) { return "openai", p.opts.Model }

var _ contextos.PlannerModel = (*Planner)(nil)
