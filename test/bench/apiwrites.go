package main

import (
	"github.com/taskops/task-operator/test/harness"
)

// metrics is a parsed scrape (harness.ParseMetrics, on expfmt).
type metrics = harness.Metrics

// apiWrites is the API server's count of write requests by resource key
// (harness.ResourceKey; apiserver_request_total, every response code).
func apiWrites(m metrics) map[string]float64 {
	return apiWritesWhere(m, func(string) bool { return true })
}

// apiConflicts is like apiWrites for the writes refused with 409 Conflict.
func apiConflicts(m metrics) map[string]float64 {
	return apiWritesWhere(m, func(code string) bool { return code == "409" })
}

// apiWritesWhere counts the write requests whose response code keep takes.
func apiWritesWhere(m metrics, keep func(code string) bool) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.Name == "apiserver_request_total" && harness.IsWriteVerb(s.Labels["verb"]) && keep(s.Labels["code"]) {
			out[harness.ResourceKey(s.Labels["resource"], s.Labels["subresource"])] += s.Value
		}
	}
	return out
}

// clientWrites is a controller-runtime process's own count of its write
// requests (rest_client_requests_total by method, every response code).
func clientWrites(m metrics) float64 {
	return m.Sum("rest_client_requests_total", func(l map[string]string) bool {
		switch l["method"] {
		case "POST", "PUT", "PATCH", "DELETE":
			return true
		}
		return false
	})
}

// diffMap is after - before, key by key.
func diffMap(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
