package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// api is the few calls readiness needs, as the admin over client
// certificates: the standard library is enough, so the command builds in a
// second.
type api struct {
	base string
	hc   *http.Client
}

func (c *Cluster) adminAPI(st State) (*api, error) {
	cert, err := tls.LoadX509KeyPair(c.path("pki", "admin.crt"), c.path("pki", "admin.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(c.path("pki", "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
	return &api{base: "https://" + st.APIServerHost + ":" + st.APIServerPort, hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}}, nil
}

func (a *api) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if s, ok := out.(*string); ok {
		*s = string(b)
		return nil
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (a *api) create(ctx context.Context, path string, obj any) error {
	return a.do(ctx, http.MethodPost, path, obj, nil)
}

// ready: the API server's /readyz says ok.
func (a *api) ready(ctx context.Context) bool {
	var s string
	return a.do(ctx, http.MethodGet, "/readyz", nil, &s) == nil && s == "ok"
}

// nodeSchedulable: Ready, and the node lifecycle controller has lifted the
// not-ready / unreachable taints it puts on a new node; until then nothing
// schedules.
func (a *api) nodeSchedulable(ctx context.Context, name string) bool {
	ready, taints := a.node(ctx, name)
	if ready != "True" {
		return false
	}
	for _, t := range taints {
		if strings.HasPrefix(t, "node.kubernetes.io/") {
			return false
		}
	}
	return true
}

// node is a node's Ready condition status ("" when it has none or is
// missing) and its taints' keys.
func (a *api) node(ctx context.Context, name string) (ready string, taints []string) {
	var n struct {
		Spec struct {
			Taints []struct{ Key string } `json:"taints"`
		} `json:"spec"`
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	if a.do(ctx, http.MethodGet, "/api/v1/nodes/"+name, nil, &n) != nil {
		return "", nil
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			ready = c.Status
		}
	}
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.Key)
	}
	return ready, taints
}

func (a *api) defaultServiceAccount(ctx context.Context) bool {
	return a.do(ctx, http.MethodGet, "/api/v1/namespaces/default/serviceaccounts/default", nil, nil) == nil
}

// healthz: a component's own /healthz on loopback (anonymous access is
// allowed there; its certificate is self-signed).
func healthz(ctx context.Context, port string) bool {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed, nothing secret read
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+port+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
