package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/taskops/task-operator/test/harness"
)

// operatorSettings are the manager flags a session runs the operator with.
type operatorSettings struct {
	qps   float64 // --kube-api-qps; 0: the default, no client-side limit
	burst int
}

func (s operatorSettings) String() string {
	if s.qps <= 0 {
		return "operator defaults (no client-side limit)"
	}
	return fmt.Sprintf("operator --kube-api-qps=%s --kube-api-burst=%d (one shared limiter)", fmtNum(s.qps), s.burst)
}

// operator is a running manager process (harness.Operator), with an HTTP
// client patient enough for a CPU profile.
type operator struct {
	*harness.Operator
	http *http.Client
}

// buildOperator compiles ./cmd/manager once per benchmark run, from
// -operator-source when set.
func buildOperator(_ context.Context, o *options) (string, error) {
	bin := filepath.Join(o.workDir, "manager")
	src := o.root
	if o.operatorSource != "" {
		src = o.operatorSource
	}
	return bin, harness.BuildManager(src, bin)
}

// startOperator runs the manager against the cluster with s's flags and
// waits until it is ready.
func startOperator(_ context.Context, o *options, cl *cluster, s operatorSettings, name string) (*operator, error) {
	args := []string{"--log-format=json"}
	if s.qps > 0 {
		args = append(args, "--kube-api-qps="+strconv.FormatFloat(s.qps, 'f', -1, 64), "--kube-api-burst="+strconv.Itoa(s.burst))
	}
	op := &operator{
		Operator: &harness.Operator{
			Bin: o.managerBin, Kubeconfig: cl.kubeconfig, Name: name, Metrics: true, Pprof: true,
			LogPath: filepath.Join(o.workDir, "logs", "operator-"+name+".log"), Args: append(args, o.opArgs...),
		},
		http: &http.Client{Timeout: 2 * time.Minute},
	}
	if _, err := op.Start(); err != nil {
		op.stop(o)
		return nil, fmt.Errorf("waiting for the operator to be ready: %w", err)
	}
	o.logf("operator started (pid %d, %s, log %s)", op.PID(), joinNonEmpty(" ", s.String(), strings.Join(o.opArgs, " ")), rel(o.root, op.LogPath))
	return op, nil
}

// stop ends the operator: SIGTERM, then SIGKILL if it has not exited.
func (op *operator) stop(o *options) {
	if op == nil {
		return
	}
	if err := op.Stop(); err != nil {
		o.logf("stopping the operator: %v", err)
	}
}

func (op *operator) get(ctx context.Context, url string) ([]byte, error) {
	return op.fetch(ctx, op.http, url)
}

// getLong is get without the client's timeout: ctx bounds it.
func (op *operator) getLong(ctx context.Context, url string) ([]byte, error) {
	c := *op.http
	c.Timeout = 0
	return op.fetch(ctx, &c, url)
}

func (op *operator) fetch(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

func (op *operator) metrics(ctx context.Context) (metrics, error) {
	body, err := op.get(ctx, op.MetricsURL())
	if err != nil {
		return nil, fmt.Errorf("scraping the operator's metrics: %w", err)
	}
	return harness.ParseMetrics(bytes.NewReader(body))
}

// memory is the operator's RSS and live Go heap in bytes. The heap profile
// endpoint with gc=1 runs a garbage collection first, so the heap figure is
// (nearly) live objects rather than wherever the GC cycle happens to be;
// the profile is kept in save (unless empty).
func (op *operator) memory(ctx context.Context, save string) (rss, heap float64, err error) {
	prof, err := op.get(ctx, op.PprofURL()+"/heap?gc=1")
	if err != nil {
		return 0, 0, err
	}
	if save != "" {
		_ = os.WriteFile(save, prof, 0o644)
	}
	m, err := op.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	return m.Value("process_resident_memory_bytes"), m.Value("go_memstats_heap_alloc_bytes"), nil
}

// cpuProfile records a CPU profile of the operator for d into path, in the
// background, and logs its top entries; wait for the returned channel.
func (op *operator) cpuProfile(ctx context.Context, o *options, d time.Duration, path string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		err := op.saveCPUProfile(ctx, d, path)
		if err == nil {
			err = logProfileTop(ctx, o, path)
		}
		ch <- err
	}()
	return ch
}

// cpuProfileUntil records a CPU profile of the operator from now until
// stop is closed (in pieces of cpuPiece, so it ends at most one piece
// late), merges the pieces into path and logs its top entries; wait for
// the returned channel. It covers a window whose end is not known in
// advance: a whole scenario.
func (op *operator) cpuProfileUntil(ctx context.Context, o *options, stop <-chan struct{}, path string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		var pieces []string
		defer func() {
			for _, p := range pieces {
				_ = os.Remove(p)
			}
		}()
		for stopped := false; !stopped; {
			piece := fmt.Sprintf("%s.%d", path, len(pieces))
			if err := op.saveCPUProfile(ctx, cpuPiece, piece); err != nil {
				ch <- err
				return
			}
			pieces = append(pieces, piece)
			select {
			case <-stop:
				stopped = true
			case <-ctx.Done():
				ch <- ctx.Err()
				return
			default:
			}
		}
		out, err := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof", "-proto"}, pieces...)...).Output()
		if err == nil {
			err = os.WriteFile(path, out, 0o644)
		}
		if err == nil {
			err = logProfileTop(ctx, o, path)
		}
		ch <- err
	}()
	return ch
}

// cpuPiece is the length of one piece of cpuProfileUntil.
const cpuPiece = 5 * time.Second

// saveCPUProfile records a CPU profile of the operator for d into path.
func (op *operator) saveCPUProfile(ctx context.Context, d time.Duration, path string) error {
	secs := max(int(d.Seconds()+0.5), 1)
	// The client's own timeout (2 minutes) would cut a longer profile.
	pctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	prof, err := op.getLong(pctx, op.PprofURL()+"/profile?seconds="+strconv.Itoa(secs))
	if err != nil {
		return err
	}
	return os.WriteFile(path, prof, 0o644)
}

// logProfileTop writes the top entries of a CPU profile (by cumulative
// time, then by own time) to the log: where the operator spent its CPU,
// next to the figures it explains.
func logProfileTop(ctx context.Context, o *options, path string) error {
	var parts []string
	for _, order := range []string{"-cum", "-flat"} {
		out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", order, "-nodecount=15", path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %v: %s", path, err, out)
		}
		parts = append(parts, string(out))
	}
	o.logf("CPU profile %s:\n%s", rel(o.root, path), strings.Join(parts, "\n"))
	return nil
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}
