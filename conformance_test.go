package contextos_test

import (
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
)

func TestInMemoryStoresConform(t *testing.T) {
	contextostest.RunCheckpointStoreTests(t, func(*testing.T) contextos.CheckpointStore { return contextos.NewInMemoryCheckpoints() })
	contextostest.RunPacketStoreTests(t, func(*testing.T) contextos.PacketStore { return contextos.NewInMemoryPackets() })
	contextostest.RunMemoryStoreTests(t, func(_ *testing.T, items []compiler.MemoryItem) contextos.MemoryStore {
		return contextos.NewInMemoryMemory(items...)
	})
}
