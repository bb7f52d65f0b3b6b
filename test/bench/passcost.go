package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// passCost is what the TaskQueue controller's passes cost in a window of
// fixed length: how many, their mean duration (controller-runtime's
// reconcile time: mostly waiting on the API server under load), the CPU
// they used each (a CPU profile over the window, the time under the
// queue's Reconcile) and the bytes and objects they allocated each (two
// allocation profiles, the same frame; the runtime samples one allocation
// per 512 KiB, so these are estimates).
type passCost struct {
	passes, mean float64 // count, seconds
	// recordWrite is the API server's mean time for the queue's record
	// writes in the window (PATCH taskqueues/status), which every pass
	// that admits waits for: the pass time's floor on this API server.
	recordWrite float64
	// recordWrites counts those writes, recordRefused those the API
	// server refused (409 Conflict, or 422 for a patch applied to a newer
	// record: recordpatch.go): a pass that lost its race runs again.
	recordWrites, recordRefused float64
	cpu                         float64 // seconds per pass
	bytes, objects              float64 // per pass; NaN when the profiles could not be read
}

func (p passCost) String() string {
	return fmt.Sprintf("%s passes, mean %s ms (%s record writes, %s refused, %s ms each at the API server), CPU %s ms, %s KiB and %s objects allocated per pass",
		fmtNum(p.passes), fmtNum(p.mean*1000), fmtNum(p.recordWrites), fmtNum(p.recordRefused), fmtNum(p.recordWrite*1000), fmtNum(p.cpu*1000), fmtNum(p.bytes/1024), fmtNum(p.objects))
}

// passWindowLength is how long queue passes are measured.
const passWindowLength = 15 * time.Second

// queueReconcile is the frame whose cumulative allocations are the queue
// controller's.
const queueReconcile = "taskqueue.(*Reconciler).Reconcile"

// passWindow is what measurePasses captured of a window: the snapshots at
// its ends and the profiles saved in it. The figures are read from them
// afterwards (cost), when the measured run is over: reading the profiles
// runs `go tool pprof` three times, seconds of CPU on the benchmark's own
// machine, and done at the window's end they stalled the queue they
// measure (admissions 1-1.5 s late around that moment in every repeat).
type passWindow struct {
	label, prefix string
	before, after writeSnap
}

// measurePasses captures the queue controller's passes for
// passWindowLength from now (snapshots, a CPU profile, two allocation
// profiles); label names the profile files (kept in the profiles folder).
// Read the figures with cost once the run is measured.
func measurePasses(ctx context.Context, o *options, cl *cluster, op *operator, label string) (passWindow, error) {
	prefix := filepath.Join(o.workDir, "profiles", label)
	w := passWindow{label: label, prefix: prefix}
	var err error
	if w.before, err = takeSnap(ctx, cl, op); err != nil {
		return w, err
	}
	if err := op.saveProfile(ctx, "allocs", prefix+".allocs-0.pprof"); err != nil {
		return w, err
	}
	if err := op.saveCPUProfile(ctx, passWindowLength, prefix+".cpu.pprof"); err != nil {
		return w, err
	}
	if w.after, err = takeSnap(ctx, cl, op); err != nil {
		return w, err
	}
	if err := op.saveProfile(ctx, "allocs", prefix+".allocs-1.pprof"); err != nil {
		return w, err
	}
	return w, nil
}

// cost reads the figures of a captured window (a profile that cannot be
// read is logged).
func (w passWindow) cost(ctx context.Context, o *options) passCost {
	var p passCost
	before, after, prefix := w.before, w.after, w.prefix
	o.logf("%s: queue pass window diagnosis: %s", w.label, diagnose(before, after))
	queue := func(l map[string]string) bool { return l["controller"] == "taskqueue" }
	p.passes = after.op.Sum("controller_runtime_reconcile_time_seconds_count", queue) - before.op.Sum("controller_runtime_reconcile_time_seconds_count", queue)
	p.mean = ratio(after.op.Sum("controller_runtime_reconcile_time_seconds_sum", queue)-before.op.Sum("controller_runtime_reconcile_time_seconds_sum", queue), p.passes)
	p.recordWrite, p.recordWrites = apiServerMean(before, after, "PATCH", "taskqueues", "status")
	p.recordRefused = grew(before.api, after.api, "apiserver_request_total", requestsOf("PATCH", "taskqueues", "status", "409", "422"))
	ns, err1 := cumulativeUnder(ctx, "", prefix+".cpu.pprof", "cpu", "ns", queueReconcile)
	bytes, err2 := cumulativeUnder(ctx, prefix+".allocs-0.pprof", prefix+".allocs-1.pprof", "alloc_space", "B", queueReconcile)
	objects, err3 := cumulativeUnder(ctx, prefix+".allocs-0.pprof", prefix+".allocs-1.pprof", "alloc_objects", "", queueReconcile)
	if err := errors.Join(err1, err2, err3); err != nil {
		o.logf("reading the profiles of %s: %v", w.label, err)
	}
	p.cpu, p.bytes, p.objects = ratio(ns/1e9, p.passes), ratio(bytes, p.passes), ratio(objects, p.passes)
	return p
}

// cumulativeUnder is the cumulative sample value (index: cpu, alloc_space,
// alloc_objects; shown in unit) of the frames named frame in a profile, or
// between two profiles of the same process (base not empty), read with `go
// tool pprof` (the Go toolchain that runs the benchmark).
func cumulativeUnder(ctx context.Context, base, profile, index, unit, frame string) (float64, error) {
	args := []string{"tool", "pprof", "-top", "-cum", "-nodecount=100000", "-nodefraction=0", "-sample_index=" + index}
	if unit != "" {
		args = append(args, "-unit="+unit)
	}
	if base != "" {
		args = append(args, "-diff_base="+base)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, profile)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("go tool pprof: %v: %s", err, stderr.String())
	}
	return cumulativeOf(out, frame)
}

// cumulativeOf reads the "cum" column of frame's line in `pprof -top
// -cum` output (flat flat% sum% cum cum% name); a frame absent from the
// profile allocated nothing that was sampled.
func cumulativeOf(top []byte, frame string) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(top))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasSuffix(f[5], frame) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimRight(f[3], "abcdefghijklmnopqrstuvwxyzB"), 64)
		if err != nil {
			return 0, fmt.Errorf("reading %q: %w", sc.Text(), err)
		}
		return v, nil
	}
	return 0, sc.Err()
}

// saveProfile writes one of the operator's pprof profiles (heap, allocs,
// goroutine) to path.
func (op *operator) saveProfile(ctx context.Context, name, path string) error {
	prof, err := op.get(ctx, op.PprofURL()+"/"+name)
	if err != nil {
		return err
	}
	return os.WriteFile(path, prof, 0o644)
}
