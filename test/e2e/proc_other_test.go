//go:build e2e && !linux

package e2e

import "os/exec"

// dieWithParent: only Linux can tie the operator's life to the test
// process; elsewhere TestMain's cleanup has to stop it.
func dieWithParent(*exec.Cmd) {}
