//go:build !linux

package harness

import "os/exec"

// DieWithParent: only Linux can tie a child's life to the test process;
// elsewhere the suites' cleanup has to stop it.
func DieWithParent(*exec.Cmd) {}
