package contextos_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/contextostest"
	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/replay"
)

// editingPackets is a packet store that keeps each packet's JSON and,
// with edit set, then edits the packet it was given.
type editingPackets struct {
	*contextos.InMemoryPackets
	edit bool
}

func (s editingPackets) Save(ctx context.Context, p *replay.Packet) error {
	err := s.InMemoryPackets.Save(ctx, p)
	if s.edit {
		deepcheck.Vandalize(reflect.ValueOf(p))
	}
	return err
}

// TestPacketStoreEditingPacketsChangesNotTheRun: the packet store is
// given each run's replay packet, and Capture's packet. One that edits
// the packet it was given once it has stored it changes nothing the run
// returns, records or replays: the run's result (its tool results,
// record and replay packet id), compiled context, checkpoint, the
// transcript, the stored packets and the packet Capture returns are
// those of a store that edits nothing. (The packet shared the run's
// record, compiled context and tool results.)
func TestPacketStoreEditingPacketsChangesNotTheRun(t *testing.T) {
	t.Parallel()
	play := func(t *testing.T, amount int, edit bool) playRecord {
		planner := lookupThenRefund(amount)
		packets := contextos.NewInMemoryPackets()
		h := harness(t, planner, &contextostest.Options{Runtime: contextos.Options{Replays: editingPackets{packets, edit}}})
		src := sourcesOf(h)
		src.Packets = packets
		var o playRecord
		for _, runID := range []string{"run_a1b2c3d4e5f60718", "run_a1b2c3d4e5f60719"} {
			req, rc := refundRequest(t, amount, true)
			rc.RunID = runID
			res, err := h.Runtime.Invoke(context.Background(), req, rc)
			o.Runs = append(o.Runs, src.run(t, runID, nil, res, err))
			p, err := h.Runtime.Capture(context.Background(), runID, replay.SourceDecisionRecord)
			if err != nil {
				t.Fatal(err)
			}
			o.Extra = append(o.Extra, asJSON(t, p))
		}
		src.finish(t, &o)
		return o
	}
	editsChangeNothing(t, "a packet store that edits the packets it was given", play)
}
