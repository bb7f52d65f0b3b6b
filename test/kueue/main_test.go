//go:build kueue

package kueue

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
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/test/harness"
)

// env is what every test uses.
var env struct {
	ws       *harness.Workspace
	cluster  *harness.Cluster
	c        client.WithWatch
	op       *harness.Operator
	kueue    *exec.Cmd
	kueueLog string
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "kueue: "+format+"\n", args...) }

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) (code int) {
	ws, err := harness.NewWorkspace("KUEUE", "kueue")
	if err != nil {
		logf("%v", err)
		return 1
	}
	env.ws = ws
	var cleanups []func()
	teardown := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		cleanups = nil
		if err := ws.Close(env.cluster, logf); err != nil {
			code = 1
		}
	}
	defer teardown()
	harness.CleanupOnSignal(logf, teardown)

	t0 := time.Now()
	out, err := exec.Command(filepath.Join(ws.Root, "hack", "kueue.sh")).Output()
	if err != nil {
		logf("hack/kueue.sh: %v", err)
		return 1
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		logf("hack/kueue.sh printed %q", out)
		return 1
	}
	kueueBin, crds := lines[0], lines[1]
	logf("kueue %s, CRDs %s (%s)", kueueBin, crds, time.Since(t0).Round(time.Second))

	cluster, err := harness.StartCluster(harness.ClusterOptions{Dir: ws.Dir, Logf: logf, Node: "kwok"})
	if err != nil {
		logf("%v", err)
		return 1
	}
	env.cluster, env.c = cluster, cluster.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := cluster.RunKubectl(ctx, "apply", "--server-side", "-f", crds); err != nil {
		logf("installing Kueue's CRDs: %v\n%s", err, out)
		return 1
	}
	// Kueue sets up its indexes at start and exits if its kinds are not
	// served yet.
	if out, err := cluster.RunKubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "-f", crds); err != nil {
		logf("waiting for Kueue's CRDs: %v\n%s", err, out)
		return 1
	}
	stop, err := startKueue(kueueBin, cluster.Kubeconfig)
	if err != nil {
		logf("starting Kueue: %v", err)
		return 1
	}
	cleanups = append(cleanups, stop)

	bin, err := ws.ManagerBinary(logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	env.op = &harness.Operator{Bin: bin, Kubeconfig: cluster.Kubeconfig, LogPath: filepath.Join(ws.Dir, "operator.log"), Name: "kueue"}
	if _, err := env.op.Start(); err != nil {
		logf("starting the operator: %v", err)
		return 1
	}
	cleanups = append(cleanups, func() { _ = env.op.Stop() })
	logf("setup took %s (operator log %s, Kueue log %s)", time.Since(t0).Round(time.Second), env.op.LogPath, env.kueueLog)
	return m.Run()
}

// metricsCertDir is where Kueue v0.17.0 reads its metrics certificate when
// its internal certificate management is off.
const metricsCertDir = "/etc/kueue/metrics/certs"

// startKueue runs Kueue as a local process against the cluster, with a
// self-signed certificate for its webhook and metrics servers (both on
// loopback), and returns how to stop it and undo what it needed.
func startKueue(bin, kubeconfig string) (func(), error) {
	dir := filepath.Join(env.ws.Dir, "kueue")
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		return nil, err
	}
	if err := selfSignedCert(certs); err != nil {
		return nil, err
	}
	var undo []func()
	undoAll := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	// Create only what does not exist, and remove only that.
	for _, d := range []string{"/etc/kueue", "/etc/kueue/metrics", metricsCertDir} {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(d, 0o755); err != nil {
				undoAll()
				return nil, err
			}
			d := d
			undo = append(undo, func() { _ = os.RemoveAll(d) })
		}
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		target := filepath.Join(metricsCertDir, f)
		if _, err := os.Stat(target); err == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(certs, f))
		if err != nil {
			undoAll()
			return nil, err
		}
		if err := os.WriteFile(target, data, 0o600); err != nil {
			undoAll()
			return nil, err
		}
		undo = append(undo, func() { _ = os.Remove(target) })
	}
	ports, err := freePorts(3)
	if err != nil {
		undoAll()
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
`, ports[0], ports[1], ports[2], certs)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		undoAll()
		return nil, err
	}
	env.kueueLog = filepath.Join(dir, "kueue.log")
	logFile, err := os.Create(env.kueueLog)
	if err != nil {
		undoAll()
		return nil, err
	}
	cmd := exec.Command(bin, "--config="+cfgPath, "--kubeconfig="+kubeconfig, "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		undoAll()
		return nil, err
	}
	env.kueue = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	undo = append(undo, func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := exited
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	})
	// Ready once its health endpoint answers.
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[0]))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("readyz: %s", resp.Status)
		}
		if time.Now().After(deadline) {
			undoAll()
			tail, _ := os.ReadFile(env.kueueLog)
			return nil, fmt.Errorf("kueue not ready after 60 s: %v\n%s", err, lastLines(tail, 20))
		}
		select {
		case <-exited:
			tail, _ := os.ReadFile(env.kueueLog)
			undoAll()
			return nil, fmt.Errorf("kueue exited: %v\n%s", cmd.ProcessState, lastLines(tail, 20))
		default:
		}
		time.Sleep(250 * time.Millisecond) // polling interval, not a condition
	}
	return undoAll, nil
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

func freePorts(n int) ([]int, error) {
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
