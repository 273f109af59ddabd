package temporalrun_test

import (
	"os"
	"syscall"
)

// crash kills this process at once, as the OOM killer or a lost machine
// would.
func crash() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
