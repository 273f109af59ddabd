package replay

// PacketDigest exposes the digest Seal writes, so a test can recompute a
// packet_hash over a changed packet as a tamperer could.
func PacketDigest(p *Packet) (string, error) { return p.digest() }
