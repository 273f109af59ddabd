package decision

// MemoryStoreHolding returns a MemoryStore holding stored (records' bytes
// as Seal gave them, chained from GenesisHash) as if it had appended
// them: the in-memory store's form of a store an earlier release wrote.
func MemoryStoreHolding(stored [][]byte) *MemoryStore {
	m := NewMemoryStore()
	for _, b := range stored {
		k, err := readKeys(b)
		m.keep(b, k.RecordID, k.RunID, err == nil)
		m.head = k.RecordHash
	}
	return m
}
