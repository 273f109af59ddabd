package engine

import (
	"context"
	"time"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/replay"
)

// gatewayOptions derives the options of a runtime's gateway from its
// Options: the host's Options.Gateway as given, but for
//   - Now: the runtime's clock (Options.Now), so approval TTLs and the
//     run's readings come from one clock;
//   - TracerProvider: the runtime's (Options.TracerProvider), so a call's
//     span is a child of the run's;
//   - Transcript: the runtime's (Options.Transcripts) when set;
//   - Logger: the runtime's (Options.Logger) when the host set none.
//
// A live run and a replay both build their gateway from it: a replay
// applies its own overrides on top (replayGatewayOptions), and keeps every
// other option.
func gatewayOptions(o *Options) gateway.Options {
	g := o.Gateway
	g.Now = o.Now
	g.TracerProvider = o.TracerProvider
	if o.Transcripts != nil {
		g.Transcript = o.Transcripts
	}
	if g.Logger == nil {
		g.Logger = o.Logger
	}
	return g
}

// replayGatewayOptions derives the options of a replay's gateway from the
// live run's (gatewayOptions of the replaying runtime). Every option is
// kept — redactors, backoff and jitter, grace, attachment scope, logger,
// and any option added later — but these, which a replay must not share
// with live runs or which the packet decides:
//   - Idempotency, Approvals and Transcript: fresh in-memory ones (nil, the
//     gateway's defaults). A replay makes no live call and records nothing
//     the host keeps; the runtime reads the replay's own transcript back to
//     compare it with the packet's.
//   - Sleep: returns at once (or with the context's error). Backoff and
//     jitter are kept, so the attempts are the recorded ones, but a replay
//     does not wait them out.
//   - OmitContractMetadata: set when the packet was recorded before call
//     envelopes carried contract metadata, so its envelopes are the
//     recorded ones.
func replayGatewayOptions(live gateway.Options, p *replay.Packet) gateway.Options {
	g := live
	g.Idempotency, g.Approvals, g.Transcript = nil, nil, nil
	g.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	g.OmitContractMetadata = recordedWithoutContractMetadata(p)
	return g
}
