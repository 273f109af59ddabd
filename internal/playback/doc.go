// Package playback is the machinery that pins a run for replay and plays
// it back: it is the module's own, used by the run engine (internal/engine)
// (recording every run, and Runtime.Replay), and not part of the public API.
// The wire types it records into and serves from — the packet and its
// adapter outcomes — are public, in package replay.
//
// Its nouns:
//   - a [Recorder] keeps each run's adapter attempts, as the gateway took
//     them, as replay.AdapterOutcome values;
//   - a [Playback] is a gateway.Adapter that serves recorded outcomes and
//     never calls a live system;
//   - a [Clock] records a run's clock readings, or serves recorded ones;
//   - [CompareTranscripts] finds the first step where a replayed tool
//     transcript diverges from the recorded one, as a replay.Diff;
//   - [PacketID] derives the id of the packet captured from a record.
package playback
