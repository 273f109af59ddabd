package contextos_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/contextos/contextos"
)

// TestMain fails the package when any test leaves a goroutine behind, and
// holds every checkpoint a test's run encodes to the bytes json.Marshal
// writes of its state.
func TestMain(m *testing.M) {
	contextos.VerifyCheckpointEncoding()
	goleak.VerifyTestMain(m)
}
