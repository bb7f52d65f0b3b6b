//go:build linux

package harness

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the kernel kill cmd's process when the test process
// dies (a `go test -timeout` panic skips every cleanup).
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
