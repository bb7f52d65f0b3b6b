package localcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSettingsFromTheEnvironment(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "audit.yaml")
	if err := os.WriteFile(policy, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Settings
		wantErr string
	}{
		{name: "nothing set gives the defaults", want: Settings{Node: NodeAuto, KCMQPS: 20, KCMBurst: 30, NodePods: 1000, PodGC: 12500, Timeout: 120 * time.Second}},
		{name: "every knob set", env: map[string]string{"LOCAL_CLUSTER_NODE": "kwok", "KCM_QPS": "100", "KCM_BURST": "200",
			"LOCAL_CLUSTER_NODE_PODS": "5000", "LOCAL_CLUSTER_POD_GC_THRESHOLD": "100000", "LOCAL_CLUSTER_TIMEOUT": "30", "LOCAL_CLUSTER_AUDIT_POLICY": policy},
			want: Settings{Node: NodeKwok, KCMQPS: 100, KCMBurst: 200, NodePods: 5000, PodGC: 100000, Timeout: 30 * time.Second, AuditPolicy: policy}},
		{name: "an unknown node mode is refused", env: map[string]string{"LOCAL_CLUSTER_NODE": "fake"}, wantErr: "must be real, kwok, both or auto"},
		{name: "a number that is not one is refused", env: map[string]string{"KCM_QPS": "fast"}, wantErr: "KCM_QPS must be a positive number"},
		{name: "a missing audit policy is refused", env: map[string]string{"LOCAL_CLUSTER_AUDIT_POLICY": policy + ".missing"}, wantErr: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SettingsFromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("settings (-want +got):\n%s", d)
			}
		})
	}
}

func TestADifferentSettingRestartsTheCluster(t *testing.T) {
	base := Settings{Node: NodeAuto, KCMQPS: 20, KCMBurst: 30, NodePods: 1000, PodGC: 12500}
	for _, change := range []func(*Settings){
		func(s *Settings) { s.KCMQPS = 100 },
		func(s *Settings) { s.PodGC = 100000 },
	} {
		changed := base
		change(&changed)
		if base.key() == changed.key() {
			t.Errorf("settings %+v and %+v share the key %q: Up would reuse a cluster started with other settings", base, changed, base.key())
		}
	}
	timeout := base
	timeout.Timeout = time.Minute
	if base.key() != timeout.key() {
		t.Errorf("the readiness timeout changed the key: Up would restart a cluster for nothing")
	}
}

// The state files are what shell scripts and Go read back: cluster.env,
// sourced by a shell, must give the same values as cluster.json.
func TestStateReadsBackInGoAndInTheShell(t *testing.T) {
	dir := t.TempDir()
	want := State{BinDir: "/a b/bin", APIServerPort: "31405", Settings: "node=auto kcm-qps=20", NodeMode: NodeReal, BridgeIP: "10.244.1.1", KubeconfigPath: "/it's/kubeconfig"}
	if err := want.write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cluster.json (-want +got):\n%s", d)
	}
	out, err := exec.Command("sh", "-c", `. "$1/cluster.env" && printf '%s|%s|%s|%s' "$BIN_DIR" "$SETTINGS" "$KUBECONFIG_PATH" "$POD_SUBNET"`, "sh", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want.BinDir+"|"+want.Settings+"|"+want.KubeconfigPath+"|", string(out)); d != "" {
		t.Errorf("cluster.env as the shell reads it (-want +got):\n%s", d)
	}
}

func TestComponentsAndBinariesFollowTheNodeMode(t *testing.T) {
	for mode, want := range map[string][]string{
		NodeKwok: {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"},
		NodeReal: {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet"},
		NodeBoth: {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "containerd", "kubelet"},
	} {
		if d := cmp.Diff(want, componentsFor(mode)); d != "" {
			t.Errorf("components of %s (-want +got):\n%s", mode, d)
		}
		bins := strings.Join(binariesFor(mode), " ")
		if strings.Contains(bins, "kwok") != (mode != NodeReal) || strings.Contains(bins, "kubelet") != (mode != NodeKwok) {
			t.Errorf("binaries of %s: %s", mode, bins)
		}
	}
}
