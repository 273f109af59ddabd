package contextos_test

import (
	"context"
	"testing"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/compiler"
	"github.com/contextos/contextos/contextostest"
)

func TestInMemoryStoresConform(t *testing.T) {
	contextostest.RunCheckpointStoreTests(t, func(*testing.T) contextos.CheckpointStore { return contextos.NewInMemoryCheckpoints() })
	contextostest.RunPacketStoreTests(t, func(*testing.T) contextos.PacketStore { return contextos.NewInMemoryPackets() })
	contextostest.RunMemoryStoreTests(t, func(_ *testing.T, items []compiler.MemoryItem) (contextos.MemoryStore, func(context.Context) ([]contextos.MemoryProposal, error)) {
		m := contextos.NewInMemoryMemory(items...)
		return m, func(context.Context) ([]contextos.MemoryProposal, error) { return m.Proposals(), nil }
	})
}
