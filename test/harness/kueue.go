package harness

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Kueue (v0.17.0, built by hack/kueue.sh from the Go module proxy) as a
// local process next to a local cluster: the Kueue and MultiKueue suites
// run one per control plane. Its webhook and metrics servers serve a
// self-signed certificate on loopback; its health endpoint tells when it
// is ready.

// KueueBuild builds (or reuses) Kueue: its binary and the folder of its
// CRDs (from the same module).
func KueueBuild(root string) (bin, crds string, err error) {
	out, err := exec.Command(filepath.Join(root, "hack", "kueue.sh")).Output()
	if err != nil {
		return "", "", fmt.Errorf("hack/kueue.sh: %w", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		return "", "", fmt.Errorf("hack/kueue.sh printed %q", out)
	}
	return lines[0], lines[1], nil
}

// InstallKueueCRDs applies Kueue's CRDs to the cluster and waits until
// they are served: Kueue sets up its indexes at start and exits if its
// kinds are not served yet.
func (c *Cluster) InstallKueueCRDs(crds string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := c.RunKubectl(ctx, "apply", "--server-side", "-f", crds); err != nil {
		return fmt.Errorf("installing Kueue's CRDs: %w\n%s", err, out)
	}
	if out, err := c.RunKubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "-f", crds); err != nil {
		return fmt.Errorf("waiting for Kueue's CRDs: %w\n%s", err, out)
	}
	return nil
}

// KueueOptions says how to run one Kueue.
type KueueOptions struct {
	Bin        string
	Kubeconfig string // the cluster it manages
	Dir        string // its config, certificates and log
	// Config is YAML appended to its Configuration (MultiKueue's section).
	Config string
}

// Kueue is a running Kueue process.
type Kueue struct {
	Log         string // its log file
	stop        func()
	webhookPort int
	cert        []byte // the certificate its webhook server serves (PEM)
}

// Stop stops Kueue (SIGINT, SIGKILL after 15 s) and undoes what it
// needed. Safe to call more than once.
func (k *Kueue) Stop() { k.stop() }

// kueueMetricsCertDir is where Kueue v0.17.0 reads its metrics
// certificate when its internal certificate management is off.
const kueueMetricsCertDir = "/etc/kueue/metrics/certs"

// kueueMetricsCerts counts the Kueues using the certificate at
// kueueMetricsCertDir: the last one to stop removes what the first made.
var kueueMetricsCerts metricsCerts

type metricsCerts struct {
	sync.Mutex
	users int
	undo  []func()
}

// StartKueue runs Kueue against a cluster and returns once its health
// endpoint says ready.
func StartKueue(o KueueOptions) (*Kueue, error) {
	certs := filepath.Join(o.Dir, "certs")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		return nil, err
	}
	if err := selfSignedCert(certs); err != nil {
		return nil, err
	}
	releaseCert, err := useKueueMetricsCert(certs)
	if err != nil {
		return nil, err
	}
	ports, err := FreePorts(3)
	if err != nil {
		releaseCert()
		return nil, err
	}
	config := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
leaderElection:
  leaderElect: false
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
internalCertManagement:
  enable: false
integrations:
  frameworks: ["batch/job"]
%s`, ports[0], ports[1], ports[2], certs, o.Config)
	cfgPath := filepath.Join(o.Dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		releaseCert()
		return nil, err
	}
	k := &Kueue{Log: filepath.Join(o.Dir, "kueue.log"), webhookPort: ports[2]}
	if k.cert, err = os.ReadFile(filepath.Join(certs, "tls.crt")); err != nil {
		releaseCert()
		return nil, err
	}
	logFile, err := os.Create(k.Log)
	if err != nil {
		releaseCert()
		return nil, err
	}
	cmd := exec.Command(o.Bin, "--config="+cfgPath, "--kubeconfig="+o.Kubeconfig, "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		releaseCert()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	k.stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			logFile.Close()
			releaseCert()
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[0]))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return k, nil
			}
			err = fmt.Errorf("readyz: %s", resp.Status)
		}
		select {
		case <-exited:
			k.stop()
			tail, _ := os.ReadFile(k.Log)
			return nil, fmt.Errorf("kueue exited: %v\n%s", cmd.ProcessState, lastLines(tail, 20))
		default:
		}
		if time.Now().After(deadline) {
			k.stop()
			tail, _ := os.ReadFile(k.Log)
			return nil, fmt.Errorf("kueue not ready after 60 s: %v\n%s", err, lastLines(tail, 20))
		}
		time.Sleep(250 * time.Millisecond) // polling interval, not a condition
	}
}

// useKueueMetricsCert puts the certificate in certs at
// kueueMetricsCertDir for one more Kueue, creating only what does not
// exist; the returned release removes it after the last user.
func useKueueMetricsCert(certs string) (release func(), err error) {
	m := &kueueMetricsCerts
	m.Lock()
	defer m.Unlock()
	release = func() {
		m.Lock()
		defer m.Unlock()
		if m.users--; m.users == 0 {
			m.undoAll()
		}
	}
	if m.users++; m.users > 1 {
		return release, nil
	}
	if err := m.create(certs); err != nil {
		m.users--
		m.undoAll()
		return nil, err
	}
	return release, nil
}

// create makes kueueMetricsCertDir and the certificate in it, recording
// how to undo each step; m is locked.
func (m *metricsCerts) create(certs string) error {
	for _, d := range []string{"/etc/kueue", "/etc/kueue/metrics", kueueMetricsCertDir} {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
			m.undo = append(m.undo, func() { _ = os.RemoveAll(d) })
		}
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		target := filepath.Join(kueueMetricsCertDir, f)
		if _, err := os.Stat(target); err == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(certs, f))
		if err == nil {
			err = os.WriteFile(target, data, 0o600)
		}
		if err != nil {
			return err
		}
		m.undo = append(m.undo, func() { _ = os.Remove(target) })
	}
	return nil
}

// undoAll removes what create made, newest first; m is locked.
func (m *metricsCerts) undoAll() {
	for i := len(m.undo) - 1; i >= 0; i-- {
		m.undo[i]()
	}
	m.undo = nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// selfSignedCert writes tls.crt and tls.key for 127.0.0.1 into dir.
func selfSignedCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kueue-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	var crt, k bytes.Buffer
	_ = pem.Encode(&crt, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	_ = pem.Encode(&k, &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), k.Bytes(), 0o600)
}

// FreePorts are n loopback ports free as it returns.
func FreePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// KueueAPI is the Kueue API the suites write (Kueue v0.17 serves v1beta2).
const KueueAPI = "kueue.x-k8s.io/v1beta2"

// ClusterQueueSpec is the spec of a ClusterQueue for the namespace ns
// alone, with cpu CPUs of flavor.
func ClusterQueueSpec(ns, flavor string, cpu int) map[string]any {
	return map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
		"resourceGroups": []any{map[string]any{
			"coveredResources": []any{"cpu"},
			"flavors":          []any{map[string]any{"name": flavor, "resources": []any{map[string]any{"name": "cpu", "nominalQuota": fmt.Sprint(cpu)}}}},
		}},
	}
}

// KueueObject is a Kueue object of kind (cluster-scoped when ns is ""),
// with fields (spec, ...) at its top level.
func KueueObject(kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": KueueAPI, "kind": kind}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetName(name)
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

// KueueWebhookManifests is the file of Kueue's webhook configurations in
// its module, given the folder of its CRDs (KueueBuild).
func KueueWebhookManifests(crds string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(crds)), "webhook", "manifests.yaml")
}

// RegisterWebhooks registers those of Kueue's webhooks (manifests, the
// module's configurations) served at paths with the cluster's API server,
// calling this Kueue on loopback: "/mutate-batch-v1-job" makes Kueue
// default a Job's fields at creation, as an installed Kueue does. Only
// the webhooks of Kueue's enabled integrations may be registered: the API
// server refuses what a webhook that is not served would have to admit.
// The returned func removes them.
func (k *Kueue) RegisterWebhooks(c *Cluster, manifests string, paths ...string) (func(), error) {
	data, err := os.ReadFile(manifests)
	if err != nil {
		return nil, err
	}
	var objs []client.Object
	for _, doc := range strings.Split(string(data), "\n---") {
		var head metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, err
		}
		switch head.Kind {
		case "MutatingWebhookConfiguration":
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal([]byte(doc), cfg); err != nil {
				return nil, err
			}
			cfg.Webhooks = served(k, cfg.Webhooks, func(w *admissionregistrationv1.MutatingWebhook) *admissionregistrationv1.WebhookClientConfig {
				return &w.ClientConfig
			}, paths)
			if len(cfg.Webhooks) > 0 {
				cfg.Name = "kueue-" + cfg.Name
				objs = append(objs, cfg)
			}
		case "ValidatingWebhookConfiguration":
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal([]byte(doc), cfg); err != nil {
				return nil, err
			}
			cfg.Webhooks = served(k, cfg.Webhooks, func(w *admissionregistrationv1.ValidatingWebhook) *admissionregistrationv1.WebhookClientConfig {
				return &w.ClientConfig
			}, paths)
			if len(cfg.Webhooks) > 0 {
				cfg.Name = "kueue-" + cfg.Name
				objs = append(objs, cfg)
			}
		}
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s: no webhook served at %v", manifests, paths)
	}
	remove := func() {
		for _, o := range objs {
			_ = c.Client.Delete(context.Background(), o)
		}
	}
	for _, o := range objs {
		if err := c.Client.Create(context.Background(), o); err != nil {
			remove()
			return nil, fmt.Errorf("registering %s: %w", o.GetName(), err)
		}
	}
	return remove, nil
}

// served keeps the webhooks served at paths, each calling this Kueue on
// loopback with its certificate as the CA bundle.
func served[W any](k *Kueue, ws []W, config func(*W) *admissionregistrationv1.WebhookClientConfig, paths []string) []W {
	var out []W
	for i := range ws {
		cc := config(&ws[i])
		if cc.Service == nil || !slices.Contains(paths, ptr.Deref(cc.Service.Path, "")) {
			continue
		}
		cc.URL = ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", k.webhookPort, *cc.Service.Path))
		cc.Service, cc.CABundle = nil, k.cert
		out = append(out, ws[i])
	}
	return out
}
