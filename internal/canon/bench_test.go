package canon

import (
	"encoding/json"
	"fmt"
	"testing"
)

// doc4KB is a representative ~4 KB document: nested objects, arrays,
// numbers and non-ASCII strings.
func doc4KB(tb testing.TB) json.RawMessage {
	items := make([]map[string]any, 0, 31)
	for i := 0; i < 31; i++ {
		items = append(items, map[string]any{
			"evidence_ref": fmt.Sprintf("kg:order:ord_%03d#snapshot_kg_2026_05_03_T0930", i),
			"score":        float64(i) / 7,
			"tags":         []string{"refund", "€", "prio"},
			"ok":           i%2 == 0,
		})
	}
	b, err := json.Marshal(map[string]any{"run_id": "run_a1b2c3d4e5f60718", "items": items})
	if err != nil {
		tb.Fatal(err)
	}
	if len(b) < 3900 || len(b) > 4300 {
		tb.Fatalf("benchmark document is %d bytes, want about 4 KB", len(b))
	}
	return b
}

func BenchmarkDigest(b *testing.B) {
	doc := doc4KB(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := Digest(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ID(PrefixPolicy, "run_a1b2c3d4e5f60718", "POLICY_RETURNS_V4", "R_HIGH_VALUE_REQUIRES_APPROVAL", "sha256:00"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIDOf(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := IDOf(PrefixPolicy, StringPart("run_a1b2c3d4e5f60718"), StringPart("POLICY_RETURNS_V4"), StringPart("R_HIGH_VALUE_REQUIRES_APPROVAL"), StringPart("sha256:00")); err != nil {
			b.Fatal(err)
		}
	}
}

// usageDoc is a typed value with the integers a record carries (counts,
// durations), so the reflective encoder's integer path is measured.
type usageDoc struct {
	RunID   string         `json:"run_id"`
	Tokens  int            `json:"tokens"`
	Calls   int            `json:"tool_calls"`
	Cents   float64        `json:"cost_usd_cents"`
	WallMS  int64          `json:"wall_clock_ms"`
	Buckets map[string]int `json:"buckets"`
	Steps   []usageStep    `json:"steps"`
}

type usageStep struct {
	Index     int    `json:"index"`
	LatencyMS int64  `json:"latency_ms"`
	Status    string `json:"status"`
}

func BenchmarkDigestValue(b *testing.B) {
	d := usageDoc{RunID: "run_a1b2c3d4e5f60718", Tokens: 11842, Calls: 7, Cents: 24.5, WallMS: 29311,
		Buckets: map[string]int{"policy": 1800, "tool": 1500, "evidence": 3500, "memory": 1500, "business": 1500, "session": 2200}}
	for i := range 16 {
		d.Steps = append(d.Steps, usageStep{Index: i, LatencyMS: int64(40 * i), Status: "ok"})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Digest(&d); err != nil {
			b.Fatal(err)
		}
	}
}
