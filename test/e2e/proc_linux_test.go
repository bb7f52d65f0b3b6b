//go:build e2e && linux

package e2e

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the operator when the test process
// dies (a `go test -timeout` panic skips TestMain's cleanup).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
