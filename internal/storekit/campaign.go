package storekit

// The crash campaign: governed refunds run by several worker processes
// (the test binary re-executed) sharing one database, while the worker
// processes are SIGKILLed — by the parent at random moments, and by
// themselves at kill points inside the stores and the payments call
// (after a checkpoint save or a record append, before a tool's result is
// stored, after the payments service performed the refund). Workers start
// refunds, approve other workers' paused refunds and take over the runs
// of dead workers; a killed worker is replaced. At the end one worker,
// never killed, drives every run to its end, and the parent checks what
// must hold: each payments key performed at most once, exactly once for
// every run that ended DECIDED; every performed refund covered by its
// run's terminal record; the record chain verifies; every run that
// started has exactly one terminal record and none is left unfinished;
// each approval is used by one run; every finished run's packet replays
// equal.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// OpenFunc opens a campaign's database with an idempotency claim TTL.
type OpenFunc func(ctx context.Context, db string, claimTTL time.Duration) (Engine, error)

// Campaign configures RunCampaign.
type Campaign struct {
	// DB names the database the workers share (a URL or a file path).
	DB string
	// Open opens it, in the parent and in each worker.
	Open OpenFunc
	// Workers is how many worker processes run at once.
	Workers int
	// Chaos is how long the workers run and are killed.
	Chaos time.Duration
	// KillEvery is the mean time between the parent's kills.
	KillEvery time.Duration
	// KillPoint is the chance a worker kills itself at each kill point.
	KillPoint float64
}

// The campaign's settings: idempotency claims and runs' claims lapse fast
// so dead workers' runs are taken over within the campaign; a run's claim
// outlasts twice the longest call (one that waits out a dead holder's
// idempotency claim) with room for a loaded machine.
const (
	campaignClaimTTL     = time.Second
	campaignHeartbeatTTL = 5 * time.Second
	campaignEnv          = "CONTEXTOS_CAMPAIGN_JOB"
	campaignTest         = "TestCampaignWorker"
	campaignPrefix       = "CMP "
	campaignDrain        = 45 * time.Second
)

// campaignJob is what one worker process does.
type campaignJob struct {
	Drain     bool    `json:"drain,omitempty"`
	DB        string  `json:"db"`
	Payments  string  `json:"payments"`
	Proc      int     `json:"proc"`
	Seed      uint64  `json:"seed"`
	Until     int64   `json:"until"` // unix ms
	KillPoint float64 `json:"kill_point,omitempty"`
}

// campaignEvent is one line a worker reports.
type campaignEvent struct {
	Kind   string `json:"kind"` // run, takeover, approved, kill, drained
	Run    string `json:"run,omitempty"`
	At     string `json:"at,omitempty"`
	Status string `json:"status,omitempty"`
	// Drained: what the drain left unfinished and did.
	Unfinished []string `json:"unfinished,omitempty"`
	Restored   int      `json:"restored,omitempty"`
}

// cpView is what the campaign reads of a checkpoint (the runtime's own
// encoding, read here only to check and drive the runs).
type cpView struct {
	Active      bool                     `json:"active"`
	Terminal    bool                     `json:"terminal"`
	Stopped     string                   `json:"stopped"`
	Pending     *gateway.ApprovalRequest `json:"pending"`
	Unconfirmed json.RawMessage          `json:"unconfirmed_record"`
	InputsLost  bool                     `json:"inputs_lost"`
	Request     json.RawMessage          `json:"request"`
	Run         json.RawMessage          `json:"run_context"`
	lease       time.Duration
}

func loadView(ctx context.Context, cps contextos.CheckpointStore, runID string) (*cpView, error) {
	c, err := cps.Load(ctx, runID)
	if err != nil {
		return nil, err
	}
	var v cpView
	if err := json.Unmarshal(c.Data, &v); err != nil {
		return nil, err
	}
	v.lease = c.Lease
	return &v, nil
}

// CampaignEnv is the environment variable that turns the campaign on
// (set to 1): it takes a minute or more, so `go test ./...` skips it
// unless asked (.ci/run asks).
const CampaignEnv = "CONTEXTOS_CAMPAIGN"

// SkipCampaign skips t unless CampaignEnv is 1, and under the race
// detector (the worker processes would be too slow for the campaign's
// bounds).
func SkipCampaign(t *testing.T) {
	t.Helper()
	switch {
	case os.Getenv(CampaignEnv) != "1":
		t.Skipf("the crash campaign runs when %s=1 (it takes a minute or more)", CampaignEnv)
	case Race:
		t.Skip("the crash campaign runs without the race detector")
	}
}

// RunCampaign runs the campaign on c's database and fails t on any
// violation. It prints the counts.
func RunCampaign(t *testing.T, c Campaign) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Chaos+campaignDrain+2*time.Minute)
	defer cancel()
	p := NewPayments(t)
	st, err := c.Open(ctx, c.DB, campaignClaimTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	until := time.Now().Add(c.Chaos)
	var (
		mu        sync.Mutex
		runs      = map[string]bool{}
		takeovers int
		approved  int
		selfKills = map[string]int{}
		drained   *campaignEvent
	)
	onEvent := func(e campaignEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case "run":
			runs[e.Run] = true
		case "takeover":
			takeovers++
		case "approved":
			approved++
		case "kill":
			selfKills[e.At]++
		case "drained":
			drained = &e
		}
	}
	// The chaos: c.Workers workers at all times until until, a random
	// one killed every KillEvery or so, the dead replaced.
	procs := 0
	start := func(drain bool) *campaignWorker {
		procs++
		job := campaignJob{Drain: drain, DB: c.DB, Payments: p.URL(), Proc: procs, Seed: rng.Uint64(), Until: until.UnixMilli(), KillPoint: c.KillPoint}
		if drain {
			job.Until, job.KillPoint = time.Now().Add(campaignDrain).UnixMilli(), 0
		}
		return startCampaignWorker(t, job, onEvent)
	}
	live := make([]*campaignWorker, c.Workers)
	for i := range live {
		live[i] = start(false)
	}
	parentKills := 0
	for time.Now().Before(until) {
		wait := time.Duration(rng.Int64N(int64(2 * c.KillEvery)))
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(wait):
		}
		if time.Now().After(until) {
			break
		}
		victim := live[rng.IntN(len(live))]
		if victim.kill() {
			parentKills++
		}
		for i, w := range live {
			if w.exited() {
				live[i] = start(false)
			}
		}
	}
	for _, w := range live {
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			t.Errorf("worker %d did not stop at the campaign's end:\n%s", w.job.Proc, w.output())
			w.kill()
		}
	}
	// The drain: one worker, never killed, ends every run.
	d := start(true)
	select {
	case <-d.done:
	case <-ctx.Done():
		t.Fatalf("the drain did not finish: %v\n%s", ctx.Err(), d.output())
	}
	mu.Lock()
	defer mu.Unlock()
	if drained == nil {
		t.Fatalf("the drain reported nothing:\n%s", d.output())
	}
	kills := parentKills
	for _, n := range selfKills {
		kills += n
	}
	v := checkCampaign(t, ctx, st, p, c, runs)
	for _, id := range drained.Unfinished {
		v.add("run %s is unfinished after the drain", id)
	}
	t.Logf("campaign: %d runs, %d kills (%d by the parent, %v at kill points), %d takeovers, %d approvals, %d packets restored by Capture, %d replays equal, %d violations",
		len(runs), kills, parentKills, selfKills, takeovers, approved, drained.Restored, v.replayed, len(v.list))
	fmt.Printf("campaign: runs=%d kills=%d takeovers=%d violations=%d\n", len(runs), kills, takeovers, len(v.list))
	for i, s := range v.list {
		if i == 50 {
			t.Errorf("… and %d more violations", len(v.list)-50)
			break
		}
		t.Error(s)
	}
	if kills == 0 || takeovers == 0 {
		t.Errorf("the campaign killed %d workers and took %d runs over: it tested nothing", kills, takeovers)
	}
}

// violations collects what the campaign found broken.
type violations struct {
	list     []string
	replayed int
}

func (v *violations) add(format string, args ...any) {
	v.list = append(v.list, fmt.Sprintf(format, args...))
}

// checkCampaign checks what must hold once every run has ended.
func checkCampaign(t *testing.T, ctx context.Context, st Engine, p *Payments, c Campaign, announced map[string]bool) *violations {
	v := &violations{}
	_, effects := p.Counts()
	byRun := map[string][]string{} // run → payments keys it performed
	for key, run := range p.Runs() {
		if effects[key] > 1 {
			v.add("payments key %s of run %s performed %d times", key, run, effects[key])
		}
		if effects[key] > 0 {
			byRun[run] = append(byRun[run], key)
		}
	}
	if err := st.Records().Verify(ctx); err != nil {
		v.add("the record chain does not verify: %v", err)
	}
	all, err := st.Records().List(ctx, decision.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string][]*decision.Record{}
	approvals := map[string]string{}
	for _, r := range all {
		recs[r.RunID] = append(recs[r.RunID], r)
	}
	ids, err := st.Checkpoints().RunIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rt := replayRuntime(t, p.URL())
	for run := range announced {
		if !slices.Contains(ids, run) && (len(byRun[run]) > 0 || len(recs[run]) > 0) {
			v.add("run %s, never claimed, has %d refunds and %d records", run, len(byRun[run]), len(recs[run]))
		}
	}
	for _, run := range ids {
		cp, err := loadView(ctx, st.Checkpoints(), run)
		if err != nil {
			v.add("run %s: checkpoint: %v", run, err)
			continue
		}
		if !cp.Terminal {
			v.add("run %s is stuck: its checkpoint is not terminal (active %t, stopped %q, pending %t)", run, cp.Active, cp.Stopped, cp.Pending != nil)
			continue
		}
		closed := map[string]bool{}
		for _, r := range recs[run] {
			if r.Status == decision.Closed {
				closed[r.Closes] = true
			}
		}
		var terminal []*decision.Record
		for _, r := range recs[run] {
			switch r.Status {
			case decision.Decided, decision.Rejected, decision.Escalated:
				if !closed[r.RecordID] {
					terminal = append(terminal, r)
				}
			}
		}
		if len(terminal) != 1 {
			v.add("run %s has %d terminal records", run, len(terminal))
			continue
		}
		rec := terminal[0]
		for _, a := range rec.Approvals {
			if other, ok := approvals[a.ApprovalID]; ok && other != run {
				v.add("approval %s used by runs %s and %s", a.ApprovalID, other, run)
			}
			approvals[a.ApprovalID] = run
		}
		keys := byRun[run]
		if rec.Status == decision.Decided && rec.Outcome == "approved" && len(keys) != 1 {
			v.add("run %s ended DECIDED approved with %d refunds performed", run, len(keys))
		}
		if len(keys) > 0 && !slices.ContainsFunc(rec.EvidenceRefs, func(ref string) bool { return strings.HasPrefix(ref, "tool:adp_payments.issue_refund:") }) {
			v.add("run %s performed a refund its terminal %s record does not cover", run, rec.Status)
		}
		if cp.InputsLost {
			continue
		}
		id := ""
		if rec.Replay != nil {
			id = rec.Replay.ReplayPacketID
		}
		pk, err := st.Packets().Get(ctx, id)
		if err != nil {
			v.add("run %s ended without its replay packet %q: %v", run, id, err)
			continue
		}
		report, err := rt.Replay(ctx, pk)
		switch {
		case err != nil:
			v.add("run %s: replay: %v", run, err)
		case report.Status != replay.ReplayEqual:
			v.add("run %s: replay %s: %+v%s", run, report.Status, report.Diffs, keepPacket(t, run, pk))
		default:
			v.replayed++
		}
	}
	return v
}

// replayRuntime is a runtime that replays the campaign's packets.
func replayRuntime(t *testing.T, paymentsURL string) *contextos.Runtime {
	h := contextostest.New(t, campaignPlanner{}, [][]byte{fixture.SupportPack()}, &contextostest.Options{
		Runtime: contextos.Options{Adapters: Adapters(t, paymentsURL), Evidence: Evidence(t)}})
	return h.Runtime
}

// campaignPlanner plans a refund by turn: the lookup, then the refund of
// the request's amount with the approved decision.
type campaignPlanner struct{}

func (campaignPlanner) Plan(_ context.Context, req *contextos.PlanRequest) (*contextos.Plan, error) {
	if req.Turn == 0 {
		return LookupPlan(), nil
	}
	amount := 0
	switch a := req.Request.Input.Context["refund_amount"].(type) {
	case int:
		amount = a
	case float64:
		amount = int(a)
	}
	return RefundPlan(amount), nil
}

// campaignWorker is a running worker process.
type campaignWorker struct {
	job      campaignJob
	cmd      *exec.Cmd
	done     chan struct{}
	killedBy atomic.Bool
	mu       sync.Mutex
	out      strings.Builder
}

func startCampaignWorker(t *testing.T, job campaignJob, onEvent func(campaignEvent)) *campaignWorker {
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+campaignTest+"$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), campaignEnv+"="+string(b))
	w := &campaignWorker{job: job, cmd: cmd, done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.out.Len() < 1<<20 {
			w.out.Write(b)
		}
		return len(b), nil
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, campaignPrefix); ok {
				var e campaignEvent
				if json.Unmarshal([]byte(rest), &e) == nil {
					onEvent(e)
					continue
				}
			}
			w.mu.Lock()
			if w.out.Len() < 1<<20 {
				w.out.WriteString(line + "\n")
			}
			w.mu.Unlock()
		}
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() { w.kill() })
	return w
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// kill SIGKILLs the worker if it still runs, and reports whether it did.
func (w *campaignWorker) kill() bool {
	if w.exited() {
		return false
	}
	w.killedBy.Store(true)
	_ = w.cmd.Process.Kill()
	<-w.done
	return true
}

func (w *campaignWorker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *campaignWorker) output() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

// CampaignWorker is the body of a package's TestCampaignWorker: run
// directly (no job in the environment) it skips.
func CampaignWorker(t *testing.T, open OpenFunc) {
	raw := os.Getenv(campaignEnv)
	if raw == "" {
		t.Skip("worker process of the crash campaign: runs only when TestCampaign re-executes the binary")
	}
	var job campaignJob
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := open(ctx, job.DB, campaignClaimTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := &killer{p: job.KillPoint, rng: rand.New(rand.NewPCG(job.Seed, uint64(job.Proc)))}
	opts := contextos.Options{Adapters: k.adapters(Adapters(t, job.Payments)), Evidence: Evidence(t), ReplaySampleRate: 1, HeartbeatTTL: campaignHeartbeatTTL}
	st.Configure(&opts)
	opts.Checkpoints = &killCheckpoints{CheckpointStore: opts.Checkpoints, k: k}
	opts.Decisions = &killRecords{Store: opts.Decisions, k: k}
	opts.Transcripts = &killTranscripts{TranscriptStore: opts.Transcripts, k: k}
	opts.Gateway.Idempotency = &killIdempotency{IdempotencyStore: opts.Gateway.Idempotency, k: k}
	h := contextostest.New(t, campaignPlanner{}, [][]byte{fixture.SupportPack()}, &contextostest.Options{Now: time.Now, Runtime: opts})
	w := &worker{rt: h.Runtime, st: st, job: job, k: k, until: time.UnixMilli(job.Until)}
	if job.Drain {
		w.drain(t, ctx)
		return
	}
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() { w.loop(t, ctx, g) })
	}
	wg.Wait()
}

// emit reports an event to the parent (one line; stdout is unbuffered,
// so a line is out before a kill that follows it).
func emit(e campaignEvent) {
	b, _ := json.Marshal(e)
	fmt.Println(campaignPrefix + string(b))
}

// killer kills its process at kill points, each with chance p.
type killer struct {
	p   float64
	mu  sync.Mutex
	rng *rand.Rand
}

func (k *killer) point(at string) {
	if k.p == 0 {
		return
	}
	k.mu.Lock()
	hit := k.rng.Float64() < k.p
	k.mu.Unlock()
	if !hit {
		return
	}
	emit(campaignEvent{Kind: "kill", At: at})
	self, _ := os.FindProcess(os.Getpid())
	_ = self.Kill()
	select {} // the signal is on its way
}

func (k *killer) intn(n int) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rng.IntN(n)
}

// adapters kills the process after the payments service performed a
// refund and before its result reaches the gateway.
func (k *killer) adapters(regs []gateway.Registration) []gateway.Registration {
	for i, r := range regs {
		if r.AdapterID != "adp_payments" {
			continue
		}
		inner := r.Adapter
		regs[i].Adapter = gateway.AdapterFunc(func(ctx context.Context, c *gateway.Call) (*gateway.Outcome, error) {
			out, err := inner.Call(ctx, c)
			k.point("payments.performed")
			return out, err
		})
	}
	return regs
}

type killCheckpoints struct {
	contextos.CheckpointStore
	k *killer
}

func (s *killCheckpoints) Save(ctx context.Context, c *contextos.Checkpoint) error {
	s.k.point("checkpoint.before_save")
	err := s.CheckpointStore.Save(ctx, c)
	s.k.point("checkpoint.saved")
	return err
}

type killRecords struct {
	decision.Store
	k *killer
}

func (s *killRecords) Append(ctx context.Context, r *decision.Record) (*decision.Record, error) {
	s.k.point("record.before_append")
	out, err := s.Store.Append(ctx, r)
	s.k.point("record.appended")
	return out, err
}

type killTranscripts struct {
	contextos.TranscriptStore
	k *killer
}

func (s *killTranscripts) Append(ctx context.Context, e gateway.TranscriptEntry) error {
	err := s.TranscriptStore.Append(ctx, e)
	s.k.point("transcript.appended")
	return err
}

type killIdempotency struct {
	gateway.IdempotencyStore
	k *killer
}

func (s *killIdempotency) Complete(ctx context.Context, key string, res *gateway.ToolResultEnvelope) error {
	s.k.point("idempotency.before_complete")
	return s.IdempotencyStore.Complete(ctx, key, res)
}

// worker is a campaign worker's runtime and what it does.
type worker struct {
	rt    *contextos.Runtime
	st    Engine
	job   campaignJob
	k     *killer
	until time.Time
	n     atomic.Int64
}

// loop starts refunds, approves paused ones and takes dead workers' runs
// over until the campaign ends.
func (w *worker) loop(t *testing.T, ctx context.Context, g int) {
	for time.Now().Before(w.until) {
		switch r := w.k.intn(10); {
		case r < 5:
			w.newRun(t, ctx, g)
		case r < 7:
			w.approveSome(ctx)
		default:
			w.takeOverSome(ctx)
		}
	}
}

func (w *worker) newRun(t *testing.T, ctx context.Context, g int) {
	amount := 1200
	if w.k.intn(2) == 0 {
		amount = 4200 // above the finance gate's threshold: it pauses
	}
	id := fmt.Sprintf("run_cmp_%d_%d_%d_%d", w.job.Proc, os.Getpid(), g, w.n.Add(1))
	emit(campaignEvent{Kind: "run", Run: id})
	req, rc := RefundRequest(t, id, amount)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, _ = w.rt.Invoke(cctx, req, rc)
}

// sample returns up to n run ids of the store, at random.
func (w *worker) sample(ctx context.Context, n int) []string {
	ids, err := w.st.Checkpoints().RunIDs(ctx)
	if err != nil || len(ids) == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, ids[w.k.intn(len(ids))])
	}
	return out
}

// approveSome approves one paused run it finds (another worker's, likely).
func (w *worker) approveSome(ctx context.Context) {
	for _, id := range w.sample(ctx, 6) {
		cp, err := loadView(ctx, w.st.Checkpoints(), id)
		if err != nil || cp.Active || cp.Terminal || cp.Pending == nil || len(cp.Unconfirmed) > 0 {
			continue
		}
		a := contextostest.Approval(cp.Pending, FinanceLead, time.Now())
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res, err := w.rt.Resume(cctx, id, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
		cancel()
		if err == nil {
			emit(campaignEvent{Kind: "approved", Run: id, Status: string(res.Status)})
		}
		return
	}
}

// takeOverSome takes over one run whose claim has lapsed, or settles one
// that stopped.
func (w *worker) takeOverSome(ctx context.Context) {
	for _, id := range w.sample(ctx, 6) {
		cp, err := loadView(ctx, w.st.Checkpoints(), id)
		if err != nil || cp.Terminal || !cp.Active && cp.Pending != nil && len(cp.Unconfirmed) == 0 || cp.Active && cp.lease > 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res, err := w.rt.Resume(cctx, id, contextos.ResumeInput{Takeover: true})
		cancel()
		if err == nil && cp.Active {
			emit(campaignEvent{Kind: "takeover", Run: id, Status: string(res.Status)})
		}
		return
	}
}

// drain drives every run to its end: approves the paused, takes over
// the claimed once their leases lapse, resumes the stopped, starts again
// the ones whose start failed, and captures a finished run's packet
// that is missing (its runtime was killed before it saved it).
func (w *worker) drain(t *testing.T, ctx context.Context) {
	restored := 0
	var unfinished []string
	for {
		ids, err := w.st.Checkpoints().RunIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		unfinished = unfinished[:0]
		for _, id := range ids {
			cp, err := loadView(ctx, w.st.Checkpoints(), id)
			if err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			switch {
			case cp.Terminal:
				if !cp.InputsLost && w.packetMissing(cctx, id) {
					if _, err := w.rt.Capture(cctx, id, replay.SourceDecisionRecord); err == nil {
						restored++
					} else {
						unfinished = append(unfinished, id)
					}
				}
			case cp.Active && cp.lease > 0:
				unfinished = append(unfinished, id)
			case cp.Stopped == "not_started":
				req, err := runcontext.DecodeInvokeRequest(cp.Request)
				if err != nil {
					t.Fatal(err)
				}
				rc, err := runcontext.DecodeRunContext(cp.Run)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = w.rt.Invoke(cctx, req, rc)
				unfinished = append(unfinished, id)
			case !cp.Active && cp.Pending != nil && len(cp.Unconfirmed) == 0:
				a := contextostest.Approval(cp.Pending, FinanceLead, time.Now())
				_, _ = w.rt.Resume(cctx, id, contextos.ResumeInput{Approvals: []gateway.Approval{a}})
				unfinished = append(unfinished, id)
			case !cp.Active && strings.HasPrefix(cp.Stopped, "budget_exceeded") && len(cp.Unconfirmed) == 0:
				// A run taken over more than once makes its reads again
				// (each a real call, charged), so it can run out of
				// max_tool_calls: its operator resumes it with a larger
				// budget, as the drain does. A resume without one ends it
				// ESCALATED again.
				rc, err := runcontext.DecodeRunContext(cp.Run)
				if err != nil {
					t.Fatal(err)
				}
				b := rc.RunBudget
				b.MaxToolCalls, b.TotalTokens, b.MaxCostCents, b.WallClockMS = 2*b.MaxToolCalls, 2*b.TotalTokens, 2*b.MaxCostCents, 2*b.WallClockMS
				_, _ = w.rt.Resume(cctx, id, contextos.ResumeInput{Budget: &b})
				unfinished = append(unfinished, id)
			default:
				if _, err := w.rt.Resume(cctx, id, contextos.ResumeInput{Takeover: true}); err == nil && cp.Active {
					emit(campaignEvent{Kind: "takeover", Run: id})
				}
				unfinished = append(unfinished, id)
			}
			cancel()
		}
		if len(unfinished) == 0 || time.Now().After(w.until) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	emit(campaignEvent{Kind: "drained", Unfinished: unfinished, Restored: restored})
}

// packetMissing reports whether the run's last record names a packet
// the store lacks.
func (w *worker) packetMissing(ctx context.Context, runID string) bool {
	recs, err := w.st.Records().List(ctx, decision.Filter{RunID: runID})
	if err != nil {
		return false
	}
	for _, r := range slices.Backward(recs) {
		if r.Status == decision.Closed {
			continue
		}
		if r.Replay == nil || r.Replay.ReplayPacketID == "" {
			return false
		}
		_, err := w.st.Packets().Get(ctx, r.Replay.ReplayPacketID)
		return errors.Is(err, contextos.ErrNotFound)
	}
	return false
}

// keepPacket writes the packet of a run whose replay did not come out
// equal to a file that outlives the test (the directory
// CONTEXTOS_CAMPAIGN_KEEP names, or the system's temporary directory), so
// the mismatch can be replayed and studied; it says where.
func keepPacket(t *testing.T, run string, pk *replay.Packet) string {
	dir := os.Getenv("CONTEXTOS_CAMPAIGN_KEEP")
	if dir == "" {
		dir = os.TempDir()
	}
	b, err := json.MarshalIndent(pk, "", "  ")
	if err == nil {
		path := filepath.Join(dir, "contextos-campaign-"+run+".json")
		if err = os.WriteFile(path, b, 0o600); err == nil {
			return " (packet kept in " + path + ")"
		}
	}
	t.Logf("campaign: keeping the packet of run %s: %v", run, err)
	return ""
}
