//go:build reliability

package reliability

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// promSample is one line of the Prometheus text format.
type promSample struct {
	labels map[string]string
	value  float64
}

// parseProm returns the samples of one metric (no histograms needed here).
func parseProm(text, name string) []promSample {
	var out []promSample
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			for _, kv := range splitLabels(rest[1:end]) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					continue
				}
				if uq, err := strconv.Unquote(v); err == nil {
					v = uq
				}
				labels[k] = v
			}
			rest = rest[end+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue // another metric with this prefix
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out = append(out, promSample{labels: labels, value: v})
	}
	return out
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func scrape(url string) (string, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

var writeMethods = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true}

// clientCounts is what the operator's client-go has sent: requests by
// method and by response code.
type clientCounts struct {
	writes, requests float64
	byMethod         map[string]float64
	byCode           map[string]float64
}

// operatorRequests reads rest_client_requests_total from an operator's
// metrics endpoint.
func operatorRequests(url string) (clientCounts, error) {
	text, err := scrape(url)
	if err != nil {
		return clientCounts{}, err
	}
	c := clientCounts{byMethod: map[string]float64{}, byCode: map[string]float64{}}
	for _, smp := range parseProm(text, "rest_client_requests_total") {
		m := smp.labels["method"]
		c.requests += smp.value
		c.byMethod[m] += smp.value
		c.byCode[smp.labels["code"]] += smp.value
		if writeMethods[m] {
			c.writes += smp.value
		}
	}
	return c, nil
}

func (c clientCounts) minus(o clientCounts) clientCounts {
	d := clientCounts{writes: c.writes - o.writes, requests: c.requests - o.requests, byMethod: map[string]float64{}, byCode: map[string]float64{}}
	for k, v := range c.byMethod {
		if x := v - o.byMethod[k]; x != 0 {
			d.byMethod[k] = x
		}
	}
	for k, v := range c.byCode {
		if x := v - o.byCode[k]; x != 0 {
			d.byCode[k] = x
		}
	}
	return d
}

func fmtCounts(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// apiserverWrites reads the API server's apiserver_request_total and
// returns the write requests by "resource[/subresource] VERB".
func apiserverWrites(ctx context.Context) (map[string]float64, error) {
	b, err := s.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, smp := range parseProm(string(b), "apiserver_request_total") {
		v := smp.labels["verb"]
		switch v {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY", "CREATE", "UPDATE", "DELETECOLLECTION":
		default:
			continue
		}
		r := smp.labels["resource"]
		if sub := smp.labels["subresource"]; sub != "" {
			r += "/" + sub
		}
		out[r+" "+v] += smp.value
	}
	return out, nil
}

// diffWrites is b - a, for the keys whose resource is in resources.
func diffWrites(a, b map[string]float64, resources ...string) map[string]float64 {
	want := map[string]bool{}
	for _, r := range resources {
		want[r] = true
	}
	out := map[string]float64{}
	for k, v := range b {
		r, _, _ := strings.Cut(k, " ")
		if !want[r] {
			continue
		}
		if d := v - a[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
