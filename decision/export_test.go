package decision

// MemoryStoreHolding returns a MemoryStore holding stored (records' bytes
// as Seal gave them, chained from GenesisHash) as if it had appended
// them: the in-memory store's form of a store an earlier release wrote.
func MemoryStoreHolding(stored [][]byte) *MemoryStore {
	m := NewMemoryStore()
	for i, b := range stored {
		k, _ := readKeys(b)
		m.index[k.RecordID] = i
		m.lines = append(m.lines, b)
		m.head = k.RecordHash
	}
	return m
}
