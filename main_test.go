package contextos_test

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"github.com/contextos/contextos"
)

// TestMain fails the package when any test leaves a goroutine behind, and
// holds every checkpoint a test's run encodes to the bytes json.Marshal
// writes of its state (not when benchmarks run: they measure the runtime
// as it ships).
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		contextos.VerifyCheckpointEncoding()
	}
	goleak.VerifyTestMain(m)
}
