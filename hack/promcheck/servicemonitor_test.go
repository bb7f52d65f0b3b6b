package promcheck

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/scrape"
	"github.com/prometheus/prometheus/util/teststorage"
	"go.yaml.in/yaml/v3"
)

// serviceMonitor is the part of config/prometheus/servicemonitor.yaml a
// scrape depends on.
type serviceMonitor struct {
	Metadata struct{ Name string }
	Spec     struct {
		Endpoints []struct {
			Port, Path, Scheme string
			BearerTokenFile    string `yaml:"bearerTokenFile"`
			HonorLabels        bool   `yaml:"honorLabels"`
			TLSConfig          struct {
				InsecureSkipVerify bool `yaml:"insecureSkipVerify"`
			} `yaml:"tlsConfig"`
		}
	}
}

// operatorMetrics is a scrape of the operator shaped as it serves one: the
// per-Task series carry the Task's own namespace label.
const operatorMetrics = `# HELP taskoperator_task_last_run_success Whether the Task's last finished run succeeded (1) or not (0).
# TYPE taskoperator_task_last_run_success gauge
taskoperator_task_last_run_success{namespace="team-a",task="nightly"} 0
taskoperator_task_last_run_success{namespace="team-b",task="report"} 1
`

// The shipped ServiceMonitor, scraped by Prometheus' own scrape loop with
// the scrape config the Prometheus Operator generates from it (its
// honorLabels, scheme, bearer token file and TLS settings, and the target
// labels it adds from Kubernetes service discovery, namespace first): the
// per-Task series keep the Task's namespace, which Alertmanager routes and
// the dashboard's picker use. Without honorLabels the same scrape renames it
// exported_namespace and puts the operator's namespace in its place (the
// Tekton bug); the second half shows this test would catch that.
func TestTheShippedServiceMonitorScrapeKeepsTheTasksNamespace(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(configDir, "servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sm serviceMonitor
	if err := yaml.Unmarshal(raw, &sm); err != nil {
		t.Fatal(err)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Scheme != "https" || ep.BearerTokenFile == "" || !ep.TLSConfig.InsecureSkipVerify {
		t.Errorf("endpoint %+v: the operator serves HTTPS with a self-signed certificate to bearer tokens", ep)
	}

	// The operator's endpoint: HTTPS, and only the pod's token gets in.
	const token = "prometheus-pod-token"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ep.Path || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, operatorMetrics)
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}

	got := scrapeOnce(t, sm, tokenFile, strings.TrimPrefix(srv.URL, "https://"), ep.HonorLabels)
	for _, task := range []string{`team-a nightly`, `team-b report`} {
		if !got[task] {
			t.Errorf("no series for Task %q with its own namespace; scraped %v", task, got)
		}
	}

	renamed := scrapeOnce(t, sm, tokenFile, strings.TrimPrefix(srv.URL, "https://"), false)
	if !renamed["task-operator-system nightly exported=team-a"] {
		t.Errorf("without honorLabels the namespace should become the operator's; scraped %v", renamed)
	}
}

// scrapeOnce runs Prometheus' scrape manager on one target until it has
// appended the per-Task series, and returns them as "namespace task" (plus
// " exported=..." when an exported_namespace label is there).
func scrapeOnce(t *testing.T, sm serviceMonitor, tokenFile, addr string, honor bool) map[string]bool {
	t.Helper()
	ep := sm.Spec.Endpoints[0]
	job := "serviceMonitor/task-operator-system/" + sm.Metadata.Name + "/0"
	// What the Prometheus Operator writes for the endpoint; the relabelling
	// is its standard target labelling from the discovered Endpoints.
	cfgYAML := fmt.Sprintf(`
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
- job_name: %q
  honor_labels: %t
  metrics_path: %s
  scheme: %s
  authorization:
    type: Bearer
    credentials_file: %s
  tls_config:
    insecure_skip_verify: %t
  relabel_configs:
  - source_labels: [__meta_kubernetes_namespace]
    target_label: namespace
  - source_labels: [__meta_kubernetes_service_name]
    target_label: service
  - source_labels: [__meta_kubernetes_pod_name]
    target_label: pod
  - target_label: endpoint
    replacement: %s
`, job, honor, ep.Path, ep.Scheme, tokenFile, ep.TLSConfig.InsecureSkipVerify, ep.Port)
	cfg, err := config.Load(cfgYAML, nil)
	if err != nil {
		t.Fatalf("the generated scrape config: %v\n%s", err, cfgYAML)
	}
	app := teststorage.NewAppendable()
	m, err := scrape.NewManager(&scrape.Options{}, nil, nil, nil, app, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	targets := make(chan map[string][]*targetgroup.Group, 1)
	targets <- map[string][]*targetgroup.Group{job: {{
		Source: "endpoints",
		Targets: []model.LabelSet{{
			model.AddressLabel:                model.LabelValue(net.JoinHostPort(host, port)),
			"__meta_kubernetes_namespace":     "task-operator-system",
			"__meta_kubernetes_service_name":  "task-operator-controller-manager-metrics",
			"__meta_kubernetes_pod_name":      "task-operator-controller-manager-7d9c",
			"__meta_kubernetes_endpoint_port": model.LabelValue(ep.Port),
		}},
	}}}
	go func() { _ = m.Run(targets) }()
	defer m.Stop()

	got := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no per-Task series scraped within 30 s; samples: %v", app.ResultSamples())
		}
		time.Sleep(100 * time.Millisecond)
		for _, s := range app.ResultSamples() {
			if s.L.Get(model.MetricNameLabel) != "taskoperator_task_last_run_success" {
				continue
			}
			k := s.L.Get("namespace") + " " + s.L.Get("task")
			if e := s.L.Get("exported_namespace"); e != "" {
				k += " exported=" + e
			}
			got[k] = true
		}
	}
	return got
}
