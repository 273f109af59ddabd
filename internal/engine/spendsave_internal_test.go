package engine

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/contextos/contextos/replay"
)

// TestSpendSaveBytesAreTheirOwn holds spendSave, which writes with a
// pooled writer, to bytes of their own: the saved prefix and the members
// json.Marshal writes for them, unchanged when the pooled writers are
// used again (the store may keep the bytes as they are), and the saved
// state's bytes they were cut from are not written.
func TestSpendSaveBytesAreTheirOwn(t *testing.T) {
	saved := []byte(`{"run_id":"run_1","seq":3}`)
	keep := bytes.Clone(saved)
	cp := &checkpointState{saved: saved, cut: len(saved) - 1}
	spent := &replay.Spent{Tokens: 7, CostCents: 1.5, WallClockMS: 20}
	call := &callInProgress{ToolCallID: "tc_1", Seq: 2, Tokens: 3}
	failed := []replay.StoreFailure{{}}
	for _, tc := range []struct {
		call    *callInProgress
		failed  []replay.StoreFailure
		version int
	}{{nil, nil, checkpointV4}, {call, nil, checkpointV5}, {call, failed, checkpointV6}} {
		data, version, err := spendSave(cp, spent, tc.call, tc.failed)
		if err != nil {
			t.Fatal(err)
		}
		if version != tc.version {
			t.Fatalf("version %d, want %d", version, tc.version)
		}
		want := map[string]any{"run_id": "run_1", "seq": 3, "spent_since_point": spent}
		if tc.call != nil {
			want["call_in_progress"] = tc.call
		}
		if tc.failed != nil {
			want["store_failures_since_point"] = tc.failed
		}
		wb, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, data, wb) {
			t.Fatalf("spend save = %s, want %s", data, wb)
		}
		got := bytes.Clone(data)
		// The pooled writers are used again and their buffers written
		// through to their capacity.
		for range 4 {
			w := checkpointBufs.Get().(*objectWriter)
			b := w.b[:cap(w.b)]
			for i := range b {
				b[i] = 'X'
			}
			checkpointBufs.Put(w)
		}
		if !bytes.Equal(data, got) {
			t.Fatalf("spend save changed to %s after the pool's writers were used", data)
		}
		if !bytes.Equal(saved, keep) {
			t.Fatalf("saved state changed to %s", saved)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
