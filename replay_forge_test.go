package contextos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/replay"
)

// A resealed packet whose decision record reads DECIDED "approved" to a
// case-sensitive JSON reader but decodes, through encoding/json's
// case-insensitive last-wins matching, to the stored ESCALATED record,
// must not replay equal: the packet would prove a decision the run never
// made to anyone who reads it with another tool.
func TestReplayRefusesARecordThatReadsTwoWays(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(corpusDir, "good-escalated-failed-refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p replay.Packet
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, p.Record); err != nil {
		t.Fatal(err)
	}
	rec := buf.Bytes()
	forged := bytes.Replace(rec, []byte(`"status":"ESCALATED"`), []byte(`"status":"DECIDED","outcome":"approved"`), 1)
	forged = append(forged[:len(forged)-1], []byte(`,"Status":"ESCALATED","Outcome":""}`)...)
	p.Record = forged
	p.PacketHash = ""
	if err := p.Seal(); err != nil {
		t.Logf("Seal refuses the forged packet: %v", err)
	}
	h := bareHarness(t, contextostest.NewPlanner(), nil)
	out, err := h.Runtime.Replay(context.Background(), &p)
	if err == nil && out != nil && out.Status == replay.ReplayEqual {
		t.Errorf("a packet whose record reads DECIDED approved to a case-sensitive reader replays %s", out.Status)
	}
}
