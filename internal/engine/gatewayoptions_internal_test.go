package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/internal/playback"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/replay"
	"github.com/contextos/contextos/runcontext"
)

// namedProvider is a tracer provider told apart by identity.
type namedProvider struct {
	noop.TracerProvider
	name string
}

// funcMarks makes functions of any type that, called, write their label
// to last: two function values are told apart by calling them.
type funcMarks struct{ last string }

func (m *funcMarks) make(t reflect.Type, label string) reflect.Value {
	return reflect.MakeFunc(t, func([]reflect.Value) []reflect.Value {
		m.last = label
		out := make([]reflect.Value, t.NumOut())
		for i := range out {
			out[i] = reflect.Zero(t.Out(i))
		}
		return out
	})
}

// call calls f with zero arguments (a background context for a
// context.Context) and returns the label of the marked function it
// reached, or "" when it reached none.
func (m *funcMarks) call(f reflect.Value) string {
	m.last = ""
	if f.IsNil() {
		return "nil"
	}
	t := f.Type()
	args := make([]reflect.Value, t.NumIn())
	for i := range args {
		if t.In(i) == reflect.TypeFor[context.Context]() {
			args[i] = reflect.ValueOf(context.Background())
		} else {
			args[i] = reflect.Zero(t.In(i))
		}
	}
	f.Call(args)
	return m.last
}

// identical reports whether a and b are the same value: the same pointer,
// map or slice, not merely equal contents.
func identical(a, b reflect.Value) bool {
	if a.Kind() == reflect.Interface || b.Kind() == reflect.Interface {
		if a.Kind() == reflect.Interface {
			if a.IsNil() {
				return b.Kind() == reflect.Interface && b.IsNil()
			}
			a = a.Elem()
		}
		if b.Kind() == reflect.Interface {
			if b.IsNil() {
				return false
			}
			b = b.Elem()
		}
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.UnsafePointer:
		return a.Type() == b.Type() && a.Pointer() == b.Pointer()
	case reflect.Slice:
		return a.Pointer() == b.Pointer() && a.Len() == b.Len()
	}
	return a.Interface() == b.Interface()
}

// hostGatewayOptions is a gateway.Options with every member set to a value
// of its own. Members of an interface or map type are set by hand; any
// other member is filled by kind, so a member added to gateway.Options is
// covered without editing this test (or fails it, naming the member, when
// its kind needs a value by hand).
func hostGatewayOptions(t *testing.T, marks *funcMarks) gateway.Options {
	t.Helper()
	g := gateway.Options{
		Idempotency:    gateway.NewMemoryIdempotency(),
		Approvals:      gateway.NewMemoryApprovalLog(),
		Transcript:     gateway.NewMemoryTranscript(),
		Redactors:      map[string]gateway.Redactor{"gwopts_test_rule": func(s string) (string, bool) { return s, false }},
		TracerProvider: &namedProvider{name: "host gateway"},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	v := reflect.ValueOf(&g).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		if !f.IsZero() {
			continue
		}
		switch f.Kind() {
		case reflect.Func:
			f.Set(marks.make(f.Type(), "host "+name))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(int64(1000 + i))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(1000 + i))
		case reflect.Float32, reflect.Float64:
			f.SetFloat(float64(1000 + i))
		case reflect.String:
			f.SetString("host " + name)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		default:
			t.Fatalf("gateway.Options.%s (%s) needs a value set by hand in hostGatewayOptions", name, f.Type())
		}
	}
	return g
}

// TestGatewayOptionsReachLiveRunsAndReplays: every gateway option a host
// sets on Options.Gateway reaches the gateway of a live run and of a
// replay, but the ones each documents it overrides (gatewayOptions,
// replayGatewayOptions). A member added to gateway.Options is kept by
// both, or this test fails naming it.
func TestGatewayOptionsReachLiveRunsAndReplays(t *testing.T) {
	t.Parallel()
	marks := &funcMarks{}
	host := hostGatewayOptions(t, marks)
	// New refuses these three (the runtime's own options set them), so
	// the host leaves them unset; each is checked against the runtime's.
	host.Now, host.TracerProvider, host.Transcript = nil, nil, nil
	runtimeProvider := &namedProvider{name: "runtime"}
	transcripts := gateway.NewMemoryTranscript()
	opts := Options{
		Transcripts:    transcripts,
		Gateway:        host,
		Now:            marks.make(reflect.TypeFor[func() time.Time](), "runtime Now").Interface().(func() time.Time),
		TracerProvider: runtimeProvider,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	rt, err := New(&recordedPlanner{}, pack.NewMemoryRegistry(nil), runcontext.NewStaticKeys(nil), &opts)
	if err != nil {
		t.Fatal(err)
	}
	// A packet recorded with contract metadata: a replay of it does not
	// omit it, whatever the host set.
	p := &replay.Packet{Transcript: []gateway.TranscriptEntry{{Kind: "call", Call: &gateway.ToolCallEnvelope{
		CapabilityID: "adp.x", Metadata: map[string]any{gateway.MetaProtocol: "http"}}}}}
	rp, err := rt.replayRuntime(p, &recordedPlanner{}, playback.NewPlayback(nil))
	if err != nil {
		t.Fatal(err)
	}
	// What each gateway is built from (newRuntime passes it to gateway.New).
	live, replayed := gatewayOptions(&rt.opts), gatewayOptions(&rp.opts)

	// want checks a member of the gateway options against the host's.
	type want func(hostV, gotV reflect.Value) error
	kept := func(hostV, gotV reflect.Value) error {
		if hostV.Kind() == reflect.Func {
			if hostLabel, got := marks.call(hostV), marks.call(gotV); got != hostLabel {
				return fmt.Errorf("calls %q, want the host's (%q)", got, hostLabel)
			}
			return nil
		}
		if !identical(hostV, gotV) {
			return errors.New("is not the host's")
		}
		return nil
	}
	is := func(v any) want {
		return func(_, gotV reflect.Value) error {
			if w := reflect.ValueOf(v); gotV.Kind() == reflect.Func {
				if got, wl := marks.call(gotV), marks.call(w); got != wl {
					return fmt.Errorf("calls %q, want %q", got, wl)
				}
			} else if !identical(w, gotV) {
				return fmt.Errorf("is %v, want %v", gotV, w)
			}
			return nil
		}
	}
	fresh := func(_, gotV reflect.Value) error {
		if !gotV.IsNil() {
			return errors.New("is set, want nil (the gateway's fresh in-memory default)")
		}
		return nil
	}
	noWait := func(_, gotV reflect.Value) error {
		sleep, ok := gotV.Interface().(func(context.Context, time.Duration) error)
		if !ok || sleep == nil {
			return errors.New("is not a sleep function")
		}
		if marks.call(gotV) != "" {
			return errors.New("calls the host's")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		if err := sleep(context.Background(), time.Hour); err != nil || time.Since(start) > time.Second {
			return fmt.Errorf("waits, or fails (%v), with a live context", err)
		}
		if err := sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
			return fmt.Errorf("with a canceled context returns %v", err)
		}
		return nil
	}
	// copied: the runtime's own map (New copies it: a host editing its
	// map after New changes no live gateway) holding the host's values.
	copied := func(hostV, gotV reflect.Value) error {
		if hostV.Len() == 0 || gotV.Len() != hostV.Len() {
			return fmt.Errorf("has %d members, want the host's %d", gotV.Len(), hostV.Len())
		}
		if gotV.UnsafePointer() == hostV.UnsafePointer() {
			return errors.New("is the host's own map, not the runtime's copy")
		}
		for _, k := range hostV.MapKeys() {
			g := gotV.MapIndex(k)
			if !g.IsValid() || g.Pointer() != hostV.MapIndex(k).Pointer() {
				return fmt.Errorf("[%v] is not the host's", k)
			}
		}
		return nil
	}
	runtimeNow, runtimeTracer := is(opts.Now), is(opts.TracerProvider)
	liveOverrides := map[string]want{"Now": runtimeNow, "TracerProvider": runtimeTracer, "Transcript": is(transcripts), "Redactors": copied}
	replayOverrides := map[string]want{"Now": runtimeNow, "TracerProvider": runtimeTracer, "Redactors": copied,
		"Idempotency": fresh, "Approvals": fresh, "Transcript": fresh, "Sleep": noWait,
		"OmitContractMetadata": is(false)}

	hv := reflect.ValueOf(host)
	for _, tc := range []struct {
		name      string
		got       gateway.Options
		overrides map[string]want
	}{
		{"live", live, liveOverrides},
		{"replay", replayed, replayOverrides},
	} {
		gv := reflect.ValueOf(tc.got)
		for i := range hv.NumField() {
			name := hv.Type().Field(i).Name
			check := kept
			if o, ok := tc.overrides[name]; ok {
				check = o
			}
			if err := check(hv.Field(i), gv.Field(i)); err != nil {
				t.Errorf("%s gateway: Options.Gateway.%s %v", tc.name, name, err)
			}
		}
		for name := range tc.overrides {
			if _, ok := hv.Type().FieldByName(name); !ok {
				t.Errorf("%s: override of %s, which gateway.Options no longer has", tc.name, name)
			}
		}
	}
}

// A host that sets no gateway logger gets the runtime's (the host's logger
// behind the runtime's secret redaction), on a live run and on a replay
// alike.
func TestGatewayLoggerDefaultsToTheRuntimes(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := New(&recordedPlanner{}, pack.NewMemoryRegistry(nil), runcontext.NewStaticKeys(nil), &Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	rp, err := rt.replayRuntime(&replay.Packet{}, &recordedPlanner{}, playback.NewPlayback(nil))
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := rt.opts.Logger.Handler().(secretFreeHandler); !ok || h.h != logger.Handler() {
		t.Errorf("the runtime's logger %T does not redact into the host's", rt.opts.Logger.Handler())
	}
	for name, g := range map[string]gateway.Options{"live": gatewayOptions(&rt.opts), "replay": gatewayOptions(&rp.opts)} {
		if g.Logger != rt.opts.Logger {
			t.Errorf("%s gateway logger is not the runtime's", name)
		}
	}
}
