// Command local-cluster makes the certificates and keys of the local control
// plane (hack/local-cluster.sh: the one way they are made). It writes, into
// -out:
//
//	ca.crt, ca.key                 the cluster CA (signs everything below)
//	apiserver.crt, apiserver.key   kube-apiserver serving certificate (-dns, -ips)
//	NAME.crt, NAME.key             one client certificate per -client NAME,CN,O
//	sa.key, sa.pub                 service-account token signing key pair (RSA)
//
// Usage (run by hack/local-cluster.sh up):
//
//	go run ./hack/local-cluster -out DIR -dns localhost,kubernetes -ips 127.0.0.1 \
//	    -client admin,kubernetes-admin,system:masters -client kube-scheduler,system:kube-scheduler,
//
// Only the standard library is used, so the operator module gains no dependency.
package main

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
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// validity matches the openssl path (-days 3650): the certificates live only
// as long as one local cluster, so expiry is never the interesting failure.
const validity = 3650 * 24 * time.Hour

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	out := flag.String("out", "", "folder to write the files into (must exist)")
	dns := flag.String("dns", "localhost", "comma-separated DNS names for the API server certificate")
	ips := flag.String("ips", "127.0.0.1", "comma-separated IP addresses for the API server certificate")
	var clients listFlag
	flag.Var(&clients, "client", "NAME,CN,O: a client certificate NAME.crt for user CN in group O (O may be empty); repeatable")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "local-cluster: -out is required")
		os.Exit(2)
	}
	if err := run(*out, splitList(*dns), splitList(*ips), clients); err != nil {
		fmt.Fprintln(os.Stderr, "local-cluster:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func run(out string, dnsNames, ipList []string, clients []string) error {
	now := time.Now().Add(-time.Minute) // tolerate small clock differences between processes

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "local-cluster-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(validity),
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

	var addrs []net.IP
	for _, s := range ipList {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("bad IP address %q", s)
		}
		addrs = append(addrs, ip)
	}
	if err := issue(out, "apiserver", pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		dnsNames, addrs, now, caCert, caKey); err != nil {
		return err
	}

	for _, c := range clients {
		// Commas, not colons: names like system:masters contain colons.
		parts := strings.Split(c, ",")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
			return fmt.Errorf("bad -client %q, want NAME,CN,O", c)
		}
		name, cn, org := parts[0], parts[1], parts[2]
		subject := pkix.Name{CommonName: cn}
		if org != "" {
			subject.Organization = []string{org}
		}
		if err := issue(out, name, subject, x509.ExtKeyUsageClientAuth, nil, nil, now, caCert, caKey); err != nil {
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
		NotAfter:              now.Add(validity),
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		DNSNames:              dnsNames,
		IPAddresses:           ips,
	}
	cert, err := sign(tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
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
