package kit_test

import (
	"testing"

	"github.com/contextos/contextos/transport/internal/kit"
)

// TestMachineryInstalled: package transport's init stored an
// implementation of every kit function (a missing method would have
// panicked this package's initialisation), and it answers.
func TestMachineryInstalled(t *testing.T) {
	t.Parallel()
	if _, err := kit.CheckEndpoint("http://169.254.169.254/", true); err == nil {
		t.Fatal("CheckEndpoint accepted the metadata address")
	}
}
