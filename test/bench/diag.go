package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/taskops/task-operator/test/harness"
)

// cpuTimes are the machine's busy and total CPU time (clock ticks) from the
// first line of /proc/stat; zero where there is none.
type cpuTimes struct{ busy, total float64 }

func readCPUTimes() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var t cpuTimes
	for i, v := range f[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		t.total += x
		if i != 3 && i != 4 { // idle, iowait
			t.busy += x
		}
	}
	return t
}

// machineBusy is the share of all CPUs busy between two readings, in %.
func machineBusy(a, b cpuTimes) float64 {
	return 100 * ratio(b.busy-a.busy, b.total-a.total)
}

// grew is how much the series name (those keep takes; nil: all) grew
// between two scrapes of the same process.
func grew(before, after metrics, name string, keep func(map[string]string) bool) float64 {
	return after.Sum(name, keep) - before.Sum(name, keep)
}

// requestsOf keeps the API server's series of requests of verb on
// resource (with its subresource, "" for none) and, when codes are given,
// answered with one of them.
func requestsOf(verb, resource, subresource string, codes ...string) func(map[string]string) bool {
	return func(l map[string]string) bool {
		return l["verb"] == verb && l["resource"] == resource && l["subresource"] == subresource &&
			(len(codes) == 0 || slices.Contains(codes, l["code"]))
	}
}

// apiServerMean is the API server's mean time (its
// apiserver_request_duration_seconds: arrival to response) for requests of
// verb on resource (with its subresource, if any) between two snapshots,
// and how many there were.
func apiServerMean(before, after writeSnap, verb, resource, subresource string) (mean, count float64) {
	keep := requestsOf(verb, resource, subresource)
	count = grew(before.api, after.api, "apiserver_request_duration_seconds_count", keep)
	return ratio(grew(before.api, after.api, "apiserver_request_duration_seconds_sum", keep), count), count
}

// eventsDropped is how many Events the operator's recorder did not send
// between two snapshots (taskoperator_events_dropped_total: its bounded
// queue was full, or the API server kept refusing).
func eventsDropped(before, after writeSnap) float64 {
	return grew(before.op, after.op, "taskoperator_events_dropped_total", nil)
}

// diagnose summarizes, for the log, where time went in a window: the
// operator's reconcile and queue times and its request latencies by verb,
// and the API server's busiest request kinds and API Priority and Fairness
// queueing. It is what to look at first when a target is missed.
func diagnose(before, after writeSnap) string {
	var parts []string
	if before.op != nil && after.op != nil {
		mean := func(name string, keep func(map[string]string) bool) (float64, float64) {
			s := after.op.Sum(name+"_sum", keep) - before.op.Sum(name+"_sum", keep)
			c := after.op.Sum(name+"_count", keep) - before.op.Sum(name+"_count", keep)
			return ratio(s, c), c
		}
		task := func(l map[string]string) bool { return l["controller"] == "task" || l["name"] == "task" }
		rec, recN := mean("controller_runtime_reconcile_time_seconds", task)
		qd, _ := mean("workqueue_queue_duration_seconds", task)
		wd, _ := mean("workqueue_work_duration_seconds", task)
		errs := after.op.Sum("controller_runtime_reconcile_errors_total", task) - before.op.Sum("controller_runtime_reconcile_errors_total", task)
		parts = append(parts, fmt.Sprintf("operator: %s reconciles, mean %s s (queue wait mean %s s, work %s s), %s errors, %s Events dropped",
			fmtNum(recN), fmtNum(rec), fmtNum(qd), fmtNum(wd), fmtNum(errs), fmtNum(eventsDropped(before, after))))
		var verbs []string
		for _, v := range []string{"GET", "LIST", "POST", "PATCH", "PUT", "DELETE"} {
			m, c := mean("rest_client_request_duration_seconds", func(l map[string]string) bool { return l["verb"] == v })
			if c > 0 {
				verbs = append(verbs, fmt.Sprintf("%s %s x %s ms", v, fmtNum(c), fmtNum(m*1000)))
			}
		}
		if rl, c := mean("rest_client_rate_limiter_duration_seconds", nil); c > 0 {
			verbs = append(verbs, fmt.Sprintf("client limiter wait mean %s ms", fmtNum(rl*1000)))
		}
		if len(verbs) > 0 {
			parts = append(parts, "operator requests: "+strings.Join(verbs, ", "))
		}
	}
	type kind struct {
		key        string
		count, sum float64
	}
	byKind := map[string]*kind{}
	for _, snap := range []struct {
		m    metrics
		sign float64
	}{{before.api, -1}, {after.api, 1}} {
		for _, s := range snap.m {
			if s.Name != "apiserver_request_duration_seconds_sum" && s.Name != "apiserver_request_duration_seconds_count" {
				continue
			}
			k := s.Labels["verb"] + " " + harness.ResourceKey(s.Labels["resource"], s.Labels["subresource"])
			if byKind[k] == nil {
				byKind[k] = &kind{key: k}
			}
			if strings.HasSuffix(s.Name, "_sum") {
				byKind[k].sum += snap.sign * s.Value
			} else {
				byKind[k].count += snap.sign * s.Value
			}
		}
	}
	var kinds []*kind
	for _, k := range byKind {
		if k.count > 0 && !strings.HasPrefix(k.key, "WATCH") {
			kinds = append(kinds, k)
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].sum > kinds[j].sum })
	var top []string
	for _, k := range kinds[:min(len(kinds), 8)] {
		top = append(top, fmt.Sprintf("%s %s x %s ms", k.key, fmtNum(k.count), fmtNum(k.sum/k.count*1000)))
	}
	parts = append(parts, "API server, by total time: "+strings.Join(top, ", "))
	wait := func(m metrics, suffix string) map[string]float64 {
		out := map[string]float64{}
		for _, s := range m {
			if s.Name == "apiserver_flowcontrol_request_wait_duration_seconds_"+suffix {
				out[s.Labels["priority_level"]] += s.Value
			}
		}
		return out
	}
	ws, wc := diffMap(wait(before.api, "sum"), wait(after.api, "sum")), diffMap(wait(before.api, "count"), wait(after.api, "count"))
	var apf []string
	for pl, c := range wc {
		if ws[pl] > 0.001 {
			apf = append(apf, fmt.Sprintf("%s %s requests waited mean %s ms", pl, fmtNum(c), fmtNum(ws[pl]/c*1000)))
		}
	}
	sort.Strings(apf)
	if len(apf) > 0 {
		parts = append(parts, "APF queueing: "+strings.Join(apf, ", "))
	}
	window := after.at.Sub(before.at).Seconds()
	apiCPU := after.api.Value("process_cpu_seconds_total") - before.api.Value("process_cpu_seconds_total")
	parts = append(parts, fmt.Sprintf("machine %s%% busy (all processes, %d CPUs); kube-apiserver used %s CPU-s in %s s",
		fmtNum(machineBusy(before.cpu, after.cpu)), runtime.NumCPU(), fmtNum(apiCPU), fmtNum(window)))
	if before.op != nil && after.op != nil {
		cpu := after.op.Value("process_cpu_seconds_total") - before.op.Value("process_cpu_seconds_total")
		parts = append(parts, fmt.Sprintf("operator used %s CPU-s", fmtNum(cpu)))
	}
	return strings.Join(parts, "; ")
}
