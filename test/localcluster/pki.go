package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity: the certificates live only as long as one local cluster,
// so expiry is never the interesting failure.
const certValidity = 3650 * 24 * time.Hour

// identity is one client certificate: NAME.crt and NAME.key for user CN in
// group O (O may be empty).
type identity struct{ name, cn, org string }

// identities are the cluster's clients. The controller-manager and the
// scheduler get the identities the bootstrap RBAC policy grants their roles
// to; kwok plays every kubelet and needs wide access, so it is an admin like
// the user. The real node's kubelet is a node (the Node authorizer limits it
// to its own node and pods), and the API server reaches kubelets (logs,
// exec) as an admin.
var identities = []identity{
	{"admin", "kubernetes-admin", "system:masters"},
	{"kube-controller-manager", "system:kube-controller-manager", ""},
	{"kube-scheduler", "system:kube-scheduler", ""},
	{"kwok", "kwok", "system:masters"},
	{"kubelet", "system:node:" + realNodeName, "system:nodes"},
	{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
}

// apiServerDNS are the API server certificate's names; its addresses are
// loopback, the `kubernetes` Service's and, with a real node, the bridge's.
var apiServerDNS = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}

// writePKI writes into out:
//
//	ca.crt, ca.key                 the cluster CA (signs everything below)
//	apiserver.crt, apiserver.key   kube-apiserver serving certificate
//	NAME.crt, NAME.key             one client certificate per identity
//	sa.key, sa.pub                 service-account token signing key pair (RSA)
func writePKI(out string, apiServerIPs []net.IP) error {
	now := time.Now().Add(-time.Minute) // tolerate small clock differences between processes
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "local-cluster-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(certValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caCert, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writeCertAndKey(out, "ca", caCert.Raw, caKey); err != nil {
		return err
	}
	if err := issue(out, "apiserver", pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		apiServerDNS, apiServerIPs, now, caCert, caKey); err != nil {
		return err
	}
	for _, id := range identities {
		subject := pkix.Name{CommonName: id.cn}
		if id.org != "" {
			subject.Organization = []string{id.org}
		}
		if err := issue(out, id.name, subject, x509.ExtKeyUsageClientAuth, nil, nil, now, caCert, caKey); err != nil {
			return err
		}
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(out, "sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(out, "sa.pub"), "PUBLIC KEY", pub, 0o644)
}

func issue(out, name string, subject pkix.Name, usage x509.ExtKeyUsage, dnsNames []string, ips []net.IP,
	now time.Time, ca *x509.Certificate, caKey crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		Subject:               subject,
		NotBefore:             now,
		NotAfter:              now.Add(certValidity),
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		DNSNames:              dnsNames,
		IPAddresses:           ips,
	}
	cert, err := sign(tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("%s certificate: %w", name, err)
	}
	return writeCertAndKey(out, name, cert.Raw, key)
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func writeCertAndKey(out, name string, certDER []byte, key crypto.Signer) error {
	if err := writePEM(filepath.Join(out, name+".crt"), "CERTIFICATE", certDER, 0o644); err != nil {
		return err
	}
	return writeKey(filepath.Join(out, name+".key"), key)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if data == nil {
		return errors.New("cannot PEM-encode " + path)
	}
	return os.WriteFile(path, data, mode)
}
