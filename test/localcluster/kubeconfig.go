package localcluster

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
)

// writeKubeconfig writes a kubeconfig for one identity (context
// local-cluster, namespace default), replacing the file whole.
func (c *Cluster) writeKubeconfig(file, user string, st State) error {
	pki := c.path("pki")
	var data [3]string
	for i, f := range []string{"ca.crt", user + ".crt", user + ".key"} {
		b, err := os.ReadFile(filepath.Join(pki, f))
		if err != nil {
			return err
		}
		data[i] = base64.StdEncoding.EncodeToString(b)
	}
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local-cluster
  cluster:
    server: https://%s:%s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: local-cluster
  context:
    cluster: local-cluster
    user: %s
    namespace: default
current-context: local-cluster
`, st.APIServerHost, st.APIServerPort, data[0], user, data[1], data[2], user)
	if err := os.WriteFile(file+".tmp", []byte(text), 0o600); err != nil {
		return err
	}
	return os.Rename(file+".tmp", file)
}
