package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// metrics is a parsed scrape.
type metrics []sample

// parseMetrics reads the Prometheus text exposition format (only what the
// API server and controller-runtime print: no timestamps, no exemplars).
func parseMetrics(r io.Reader) (metrics, error) {
	var out metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("%w in %q", err, line)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return s, fmt.Errorf("no value")
	} else {
		s.name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			key := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var val strings.Builder
			i := 0
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[i])
					}
					continue
				}
				val.WriteByte(rest[i])
			}
			if i >= len(rest) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels[key] = val.String()
			rest = rest[i+1:]
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// sum adds the values of the samples called name whose labels pass keep
// (nil: all).
func (m metrics) sum(name string, keep func(map[string]string) bool) float64 {
	var total float64
	for _, s := range m {
		if s.name == name && (keep == nil || keep(s.labels)) {
			total += s.value
		}
	}
	return total
}

// value is the first sample called name, NaN when there is none.
func (m metrics) value(name string) float64 {
	for _, s := range m {
		if s.name == name {
			return s.value
		}
	}
	return math.NaN()
}

// writeVerbs are the API server's request verbs that change something.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// resKey names an API resource the way the write tables do: "jobs",
// "tasks/status", "events" (both event APIs together).
func resKey(resource, subresource string) string {
	if subresource == "" {
		return resource
	}
	return resource + "/" + subresource
}

// apiWrites is the API server's count of write requests by resource key
// (apiserver_request_total, every response code).
func (m metrics) apiWrites() map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name != "apiserver_request_total" || !writeVerbs[s.labels["verb"]] {
			continue
		}
		out[resKey(s.labels["resource"], s.labels["subresource"])] += s.value
	}
	return out
}

// apiConflicts is like apiWrites for the writes refused with 409 Conflict.
func (m metrics) apiConflicts() map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name == "apiserver_request_total" && writeVerbs[s.labels["verb"]] && s.labels["code"] == "409" {
			out[resKey(s.labels["resource"], s.labels["subresource"])] += s.value
		}
	}
	return out
}

// apiWritesVerb is like apiWrites for one verb only.
func (m metrics) apiWritesVerb(verb string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name == "apiserver_request_total" && s.labels["verb"] == verb {
			out[resKey(s.labels["resource"], s.labels["subresource"])] += s.value
		}
	}
	return out
}

// clientWrites is a controller-runtime process's own count of its write
// requests (rest_client_requests_total by method, every response code).
func (m metrics) clientWrites() float64 {
	return m.sum("rest_client_requests_total", func(l map[string]string) bool {
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
