package workers

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigKey is the key of the kubeconfig in a worker's Secret.
const KubeconfigKey = "kubeconfig"

// clientFor builds a worker's client from the kubeconfig in its Secret.
// The kubeconfig must carry everything inline: a Secret that names a file
// (a token file, a certificate path), an exec plugin or an auth provider
// would let whoever writes Secrets in the operator's namespace make the
// operator read its own files or run commands (Kueue refuses the same).
func clientFor(kubeconfig []byte) (kubernetes.Interface, error) {
	if len(kubeconfig) == 0 {
		return nil, fmt.Errorf("no key %q", KubeconfigKey)
	}
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := inlineOnly(cfg); err != nil {
		return nil, err
	}
	rest, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	// A worker is another cluster, possibly far: modest rates, and no
	// read may hang a watch's relist for long.
	rest.QPS, rest.Burst, rest.Timeout = 5, 10, 30*time.Second
	rest.UserAgent = "task-operator (worker reader)"
	return kubernetes.NewForConfig(rest)
}

// inlineOnly refuses a kubeconfig that reads files or runs commands.
func inlineOnly(cfg *clientcmdapi.Config) error {
	var errs []error
	for name, a := range cfg.AuthInfos {
		switch {
		case a.Exec != nil:
			errs = append(errs, fmt.Errorf("user %q: exec plugins are not allowed", name))
		case a.AuthProvider != nil:
			errs = append(errs, fmt.Errorf("user %q: auth providers are not allowed", name))
		case a.TokenFile != "", a.ClientCertificate != "", a.ClientKey != "":
			errs = append(errs, fmt.Errorf("user %q: file paths are not allowed; put the token or certificate inline", name))
		}
	}
	for name, c := range cfg.Clusters {
		if c.CertificateAuthority != "" {
			errs = append(errs, fmt.Errorf("cluster %q: certificate-authority is a file path; use certificate-authority-data", name))
		}
	}
	return errors.Join(errs...)
}
