package playback

import (
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/replay"
)

// PacketID is the id of the packet of kind captured from the record
// recordID of run runID ("rp_…"). It is derived, not drawn, so it is known
// before the record is stored: the record captured with a packet names it
// inside its record_hash (replay.replay_packet_id,
// lineage.replay_packet_id), and capturing the same record with the same
// kind again gives the same id.
func PacketID(runID, recordID string, kind replay.SourceKind) (string, error) {
	return canon.ID(canon.PrefixReplay, runID, recordID, string(kind))
}
