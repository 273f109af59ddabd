package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/gateway"
)

// A segment keeps its events up to maxSegmentEvents events or
// maxSegmentBytes bytes, then the truncated event, and drops the rest;
// the next segment starts with a bound of its own.
func TestSegmentBound(t *testing.T) {
	small := json.RawMessage(`{"kind":"progress","run_id":"run_1","turn":0}`)
	e := &runEntry{runID: "run_1", changed: make(chan struct{})}
	for range maxSegmentEvents + 10 {
		e.add(small)
	}
	if len(e.events) != maxSegmentEvents+1 || eventKind(e.events[maxSegmentEvents]) != EventTruncated || eventKind(e.events[maxSegmentEvents-1]) != "progress" {
		t.Fatalf("%d events kept, the last %s", len(e.events), e.events[len(e.events)-1])
	}

	// The next segment, of large events: those that fit in the bytes.
	e.segStart, e.segBytes, e.segCut = len(e.events), 0, false
	big := json.RawMessage(fmt.Sprintf(`{"kind":"tool_result","run_id":"run_1","pad":"%s"}`, strings.Repeat("x", 300<<10)))
	for range 5 {
		e.add(big)
	}
	seg := e.events[e.segStart:]
	if len(seg) != 4 || eventKind(seg[3]) != EventTruncated {
		t.Fatalf("the second segment kept %d events", len(seg))
	}
	var m map[string]string
	if err := json.Unmarshal(seg[3], &m); err != nil || m["run_id"] != "run_1" || !strings.Contains(m["message"], "not kept") {
		t.Errorf("the truncated event %s: %v", seg[3], err)
	}
	// An entry decodes to the events as kept, byte for byte.
	var se segmentEntry
	if err := json.Unmarshal(encodeSegment("dr_2", seg), &se); err != nil || se.RecordID != "dr_2" || len(se.Events) != 4 || string(se.Events[3]) != string(seg[3]) {
		t.Fatalf("the entry decodes to %s, %d events: %v", se.RecordID, len(se.Events), err)
	}
}

// A run's records and transcript split into its segments: each ends with
// the record a pause or an end writes and holds the results up to the
// transcript entry its record names; an IN_FLIGHT record stays in its
// segment, a CLOSED one goes with the record before it, and what comes
// after the last such record is a segment of its own.
func TestSegmentsOf(t *testing.T) {
	var entries []gateway.TranscriptEntry
	for i := range 6 {
		en := gateway.TranscriptEntry{Seq: i, ChainHash: fmt.Sprintf("h%d", i), Kind: "call"}
		if i%2 == 1 {
			en.Kind, en.Result = "result", &gateway.ToolResultEnvelope{ToolCallID: fmt.Sprintf("c%d", i)}
		}
		entries = append(entries, en)
	}
	rec := func(id string, st decision.Status, hash string) *decision.Record {
		return &decision.Record{RecordID: id, Status: st, Lineage: decision.Lineage{ToolTranscriptChainHash: hash}}
	}
	recs := []*decision.Record{
		rec("r1", decision.InFlight, "h1"),
		rec("r2", decision.Deferred, "h3"),
		rec("r3", decision.Decided, "h3"),
		rec("r4", decision.Closed, "h3"),
		rec("r5", decision.InFlight, "h5"),
	}
	segs := segmentsOf(recs, entries)
	type seg struct {
		end     string
		recs    []string
		results []string
	}
	var got []seg
	for _, s := range segs {
		var g seg
		if s.end != nil {
			g.end = s.end.RecordID
		}
		for _, r := range s.recs {
			g.recs = append(g.recs, r.RecordID)
		}
		for _, r := range s.results {
			g.results = append(g.results, r.ToolCallID)
		}
		got = append(got, g)
	}
	want := fmt.Sprint([]seg{
		{"r2", []string{"r1", "r2"}, []string{"c1", "c3"}},
		{"r3", []string{"r3", "r4"}, nil},
		{"", []string{"r5"}, []string{"c5"}},
	})
	if fmt.Sprint(got) != want || len(segs) != 3 {
		t.Errorf("segments %v, want %v", got, want)
	}
}
