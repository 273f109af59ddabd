// Package temporalrun runs governed ContextOS runs as Temporal workflows,
// for hosts whose agent work spans hours or days across many machines and
// who already run Temporal.
//
// The workflow runs the runtime's canonical loop in deterministic
// workflow code: compile, verify, score, policy and the critic are
// workflow code, while each planner turn and each gateway attempt is an
// activity (the tool call carries its derived idempotency key on every
// attempt of the activity), and the run's decision records, transcript
// entries and replay packet are written by activities to the host's
// stores. The run's clock is workflow time, so budgets and hard stops
// count workflow time and a replay of the history reads the same clock.
//
// A run that pauses on an approval gate waits for an Update (UpdateApprove)
// whose validator checks the gate, the approver's role, the tenant, the
// gate's TTL and the action digest before the update is accepted, so an
// approval the run cannot use never enters the workflow's history. The
// wait is a durable timer: a run waiting days for an approval holds no
// worker, and once the gate's TTL has passed the run goes on with the
// call refused approval_timeout. Cancelling the workflow ends the run
// ESCALATED with its record, like a cancelled Invoke.
//
// The pack registry, key resolver, evidence source and critic are read
// in workflow code: they must answer the same on every
// worker and on every replay (an in-memory registry holding the pinned
// packs, static evidence). The planner and the adapters run in
// activities and may do anything.
package temporalrun

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/pack"
)

// Names under which Register registers the workflow, its activities, its
// update and its query.
const (
	// WorkflowName is the workflow that runs one governed run.
	WorkflowName = "contextos.run"
	// UpdateApprove answers the approval a paused run awaits (Approval).
	UpdateApprove = "contextos.approve"
	// QueryPending returns the approval request a paused run awaits
	// (*gateway.ApprovalRequest, nil when it awaits none).
	QueryPending = "contextos.pending"

	activityPlan       = "contextos.plan"
	activityAttempt    = "contextos.attempt"
	activityRecord     = "contextos.append_record"
	activityVerify     = "contextos.verify_records"
	activityTranscript = "contextos.append_transcript"
	activityPacket     = "contextos.save_packet"
)

// Config is what a worker runs governed runs with. Every worker of a task
// queue must be configured alike: the workflow code of one run may run on
// any of them, and again on replay.
type Config struct {
	// Planner plans each turn, in an activity.
	Planner contextos.Planner
	// Registry and Keys resolve and verify the run's packs in workflow
	// code: they must answer the same on every worker.
	Registry pack.Registry
	Keys     pack.KeyResolver
	// Adapters are the tool adapters, called in activities; their
	// capabilities (schemas, scopes, timeouts, attempts) are the
	// gateway's in workflow code.
	Adapters []gateway.Registration
	// Decisions, Transcripts and Packets are the host's stores, written
	// by activities: the run's decision records, its transcript entries
	// and its replay packet.
	Decisions   decision.Store
	Transcripts gateway.TranscriptSink
	Packets     contextos.PacketStore
	// Runtime holds the runtime's other options (evidence, ontologies,
	// identity, overlays, replay sampling, redactors, limits). Its
	// Adapters, stores, clock, tracer and meter providers, logger and
	// OnPause are the workflow's and must be left unset; Evidence and
	// Critic run in workflow code and must be deterministic. Memory is
	// not supported (its proposals are writes).
	Runtime contextos.Options
	// ActivityRetries bounds the attempts of each activity when its
	// worker fails or times out (a governed failure is a result, never
	// retried by Temporal). Default: 5.
	ActivityRetries int32
}

// ErrConfig reports an invalid Config, naming the field.
var ErrConfig = errors.New("temporalrun: invalid configuration")

// Host is a configured set of the workflow and its activities.
type Host struct {
	cfg      Config
	adapters map[string]gateway.Adapter
}

// New checks cfg and returns the host to register on workers.
func New(cfg Config) (*Host, error) {
	o := cfg.Runtime
	switch {
	case cfg.Planner == nil:
		return nil, fmt.Errorf("%w: Planner is nil", ErrConfig)
	case cfg.Registry == nil || cfg.Keys == nil:
		return nil, fmt.Errorf("%w: Registry and Keys are required", ErrConfig)
	case cfg.Decisions == nil || cfg.Transcripts == nil || cfg.Packets == nil:
		return nil, fmt.Errorf("%w: Decisions, Transcripts and Packets are required (the host's stores)", ErrConfig)
	case len(o.Adapters) > 0:
		return nil, fmt.Errorf("%w: Runtime.Adapters is set: adapters are Config.Adapters", ErrConfig)
	case o.Decisions != nil || o.Replays != nil || o.Transcripts != nil || o.Checkpoints != nil:
		return nil, fmt.Errorf("%w: Runtime's stores are set: the workflow's stores are Config.Decisions, Transcripts and Packets", ErrConfig)
	case o.Now != nil:
		return nil, fmt.Errorf("%w: Runtime.Now is set: a run's clock is workflow time", ErrConfig)
	case o.TracerProvider != nil || o.MeterProvider != nil || o.Logger != nil || o.OnPause != nil:
		return nil, fmt.Errorf("%w: Runtime.TracerProvider, MeterProvider, Logger or OnPause is set: workflow code emits nothing a replay would repeat", ErrConfig)
	case o.Memory != nil:
		return nil, fmt.Errorf("%w: Runtime.Memory is set: its proposals would be written from workflow code, again on every replay", ErrConfig)
	case o.Gateway.Sleep != nil || o.Gateway.Idempotency != nil || o.Gateway.Approvals != nil:
		return nil, fmt.Errorf("%w: Runtime.Gateway.Sleep, Idempotency or Approvals is set: they are the workflow's", ErrConfig)
	}
	if cfg.ActivityRetries == 0 {
		cfg.ActivityRetries = 5
	}
	if cfg.ActivityRetries < 0 {
		return nil, fmt.Errorf("%w: ActivityRetries is negative", ErrConfig)
	}
	h := &Host{cfg: cfg, adapters: map[string]gateway.Adapter{}}
	for i, reg := range cfg.Adapters {
		if reg.Adapter == nil || reg.AdapterID == "" {
			return nil, fmt.Errorf("%w: Adapters[%d] has no adapter id or adapter", ErrConfig, i)
		}
		if _, dup := h.adapters[reg.AdapterID]; dup {
			return nil, fmt.Errorf("%w: Adapters[%d]: adapter %s is registered twice", ErrConfig, i, reg.AdapterID)
		}
		h.adapters[reg.AdapterID] = reg.Adapter
	}
	return h, nil
}

// Registry is where Register registers: a worker.Worker, or a testsuite
// environment.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers the workflow and its activities on r.
func (h *Host) Register(r Registry) {
	r.RegisterWorkflowWithOptions(h.Workflow, workflow.RegisterOptions{Name: WorkflowName})
	r.RegisterActivityWithOptions(h.plan, activity.RegisterOptions{Name: activityPlan})
	r.RegisterActivityWithOptions(h.attempt, activity.RegisterOptions{Name: activityAttempt})
	r.RegisterActivityWithOptions(h.appendRecord, activity.RegisterOptions{Name: activityRecord})
	r.RegisterActivityWithOptions(h.verifyRecords, activity.RegisterOptions{Name: activityVerify})
	r.RegisterActivityWithOptions(h.appendTranscript, activity.RegisterOptions{Name: activityTranscript})
	r.RegisterActivityWithOptions(h.savePacket, activity.RegisterOptions{Name: activityPacket})
}

// storeTimeout bounds one store write's activity attempt.
const storeTimeout = 30 * time.Second
