//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/taskops/task-operator/test/harness"
)

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
	m, err := harness.ParseMetrics(strings.NewReader(text))
	if err != nil {
		return clientCounts{}, err
	}
	for _, smp := range m.Samples("rest_client_requests_total") {
		m := smp.Labels["method"]
		c.requests += smp.Value
		c.byMethod[m] += smp.Value
		c.byCode[smp.Labels["code"]] += smp.Value
		if writeMethods[m] {
			c.writes += smp.Value
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
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
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
	m, err := harness.APIServerMetrics(ctx, s.cs.CoreV1().RESTClient())
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, smp := range m.Samples("apiserver_request_total") {
		if v := smp.Labels["verb"]; harness.IsWriteVerb(v) {
			out[harness.ResourceKey(smp.Labels["resource"], smp.Labels["subresource"])+" "+v] += smp.Value
		}
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
