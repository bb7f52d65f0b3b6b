package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// State is what Up records in cluster.json (and, for shell scripts, in
// cluster.env as KEY=value lines): the other commands read it back, and
// callers take ports and addresses from it. Every value is a string, keyed
// by its json name.
type State struct {
	BinDir             string `json:"BIN_DIR"`
	EtcdPort           string `json:"ETCD_PORT"`
	EtcdPeerPort       string `json:"ETCD_PEER_PORT"`
	APIServerPort      string `json:"APISERVER_PORT"`
	APIServerHost      string `json:"APISERVER_HOST"`
	KCMPort            string `json:"KCM_PORT"`
	SchedulerPort      string `json:"SCHEDULER_PORT"`
	NodeName           string `json:"NODE_NAME"`
	KubeconfigPath     string `json:"KUBECONFIG_PATH"`
	Settings           string `json:"SETTINGS"`
	NodeMode           string `json:"NODE_MODE"`
	RealNodeName       string `json:"REAL_NODE_NAME"`
	BridgeName         string `json:"BRIDGE_NAME"`
	BridgeIP           string `json:"BRIDGE_IP"`
	PodSubnet          string `json:"POD_SUBNET"`
	CgroupRoot         string `json:"CGROUP_ROOT"`
	KubeletPort        string `json:"KUBELET_PORT"`
	KubeletHealthzPort string `json:"KUBELET_HEALTHZ_PORT"`
}

// ReadState reads the state a cluster's Up recorded in dir; an error when
// there is none.
func ReadState(dir string) (State, error) {
	var s State
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("reading %s: %w", filepath.Join(dir, "cluster.json"), err)
	}
	return s, nil
}

// write records s in dir, both files replaced whole.
func (s State) write(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	var env strings.Builder
	env.WriteString("# Written by hack/local-cluster.sh up (test/localcluster); the same as cluster.json, for shell scripts.\n")
	v, t := reflect.ValueOf(s), reflect.TypeOf(s)
	for i := range t.NumField() {
		fmt.Fprintf(&env, "%s=%s\n", t.Field(i).Tag.Get("json"), ShellQuote(v.Field(i).String()))
	}
	for name, data := range map[string][]byte{"cluster.json": append(b, '\n'), "cluster.env": []byte(env.String())} {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// ShellQuote is s as one POSIX shell word, quoted only when it needs to be.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:=@%+,-", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
