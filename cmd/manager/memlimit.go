package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// The Go runtime's soft memory limit follows the container's memory limit.
// Without one the GC lets the heap grow to twice the live data (GOGC=100)
// whatever the container may use, so a large cache plus a burst of work
// can cross the limit and get the pod OOM-killed; with it the GC works
// harder as memory nears the limit. A fixed GOMEMLIMIT in the manifests
// drifted from limits.memory whenever an overlay or a chart value changed
// the latter, so the operator reads the limit itself: 7/8 of it, the rest
// for what the runtime does not count (the binary's mapped pages, stacks
// of cgo threads). GOMEMLIMIT in the environment still wins.

// softLimitShare is the part of the container's limit given to the runtime.
const softLimitShare = 7.0 / 8

// cgroupMemoryFiles hold the container's memory limit: cgroup v2, then v1.
var cgroupMemoryFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

// setSoftMemoryLimit sets the runtime's soft limit from the cgroup's
// memory limit unless GOMEMLIMIT is set; it returns the limit set (0: none)
// and the file it came from.
func setSoftMemoryLimit() (int64, string) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, "GOMEMLIMIT"
	}
	for _, f := range cgroupMemoryFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, ok := softLimit(string(b)); ok {
			debug.SetMemoryLimit(n)
			return n, f
		}
		return 0, f
	}
	return 0, ""
}

// softLimit is softLimitShare of a cgroup memory limit file's content, or
// false when it sets no limit ("max" in v2, a huge number in v1).
func softLimit(content string) (int64, bool) {
	s := strings.TrimSpace(content)
	if s == "" || s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	// cgroup v1 writes "no limit" as the largest page-aligned int64.
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0, false
	}
	return int64(float64(n) * softLimitShare), true
}
