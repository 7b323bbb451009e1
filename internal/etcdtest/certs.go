package etcdtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// Certs are PEM files for a cluster with mutual TLS on its client and peer ports, as kubeadm
// sets one up.
type Certs struct {
	// CAFile is the CA that signed the other certificates; members trust only it.
	CAFile string
	// ServerCertFile serves both the client and the peer port, for 127.0.0.1 and localhost.
	// Like kubeadm's etcd server cert it is also good for client auth: members present it to
	// each other, and people pass it to etcdctl as --cert.
	ServerCertFile string
	ServerKeyFile  string
	// ClientCertFile is a client-only certificate, CN "etcdmedic-test-client".
	ClientCertFile string
	ClientKeyFile  string
	// OtherCAFile is an unrelated CA, for "wrong --cacert" tests.
	OtherCAFile string
}

// ClientCN is the common name of Certs.ClientCertFile.
const ClientCN = "etcdmedic-test-client"

// NewCerts writes a CA, a server/peer cert, a client cert and an unrelated CA into dir ("" means
// t.TempDir()), valid from an hour ago for a day.
func NewCerts(t testing.TB, dir string) *Certs {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	c, err := writeCerts(dir, time.Now())
	if err != nil {
		t.Fatalf("etcdtest: test certificates in %s: %v", dir, err)
	}
	return c
}

func writeCerts(dir string, now time.Time) (*Certs, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &Certs{
		CAFile:         filepath.Join(dir, "ca.crt"),
		ServerCertFile: filepath.Join(dir, "server.crt"),
		ServerKeyFile:  filepath.Join(dir, "server.key"),
		ClientCertFile: filepath.Join(dir, "client.crt"),
		ClientKeyFile:  filepath.Join(dir, "client.key"),
		OtherCAFile:    filepath.Join(dir, "other-ca.crt"),
	}
	base := func(cn string) *x509.Certificate {
		return &x509.Certificate{
			Subject:   pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour),
			NotAfter:  now.Add(24 * time.Hour),
			KeyUsage:  x509.KeyUsageDigitalSignature,
		}
	}
	caTmpl := func(cn string) *x509.Certificate {
		ca := base(cn)
		ca.IsCA, ca.BasicConstraintsValid = true, true
		ca.KeyUsage |= x509.KeyUsageCertSign
		return ca
	}
	server := base("etcdtest-server")
	server.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	server.DNSNames = []string{"localhost"}
	server.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	client := base(ClientCN)
	client.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}

	ca, err := issue(caTmpl("etcdtest-ca"), nil, c.CAFile, "")
	if err != nil {
		return nil, err
	}
	if _, err := issue(server, ca, c.ServerCertFile, c.ServerKeyFile); err != nil {
		return nil, err
	}
	if _, err := issue(client, ca, c.ClientCertFile, c.ClientKeyFile); err != nil {
		return nil, err
	}
	if _, err := issue(caTmpl("etcdtest-other-ca"), nil, c.OtherCAFile, ""); err != nil {
		return nil, err
	}
	return c, nil
}

// issue signs tmpl with a new P-256 key by parent (nil: self-signed), writes the cert to
// certFile and, unless keyFile is "", the key to keyFile. The result can sign further certs.
func issue(tmpl *x509.Certificate, parent *tls.Certificate, certFile, keyFile string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return nil, err
	}
	parentCert, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		parentCert, signer = parent.Leaf, parent.PrivateKey.(crypto.Signer)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("sign %q: %w", tmpl.Subject.CommonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	if keyFile != "" {
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := writePEM(keyFile, "PRIVATE KEY", keyDER, 0o600); err != nil {
			return nil, err
		}
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

func writePEM(path, blockType string, der []byte, perm os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), perm)
}

// TLSInfo is the client side of c, what etcdctl --cacert=CAFile --cert=ClientCertFile
// --key=ClientKeyFile uses. Its ClientConfig is the TLS config of every client the harness
// makes for a TLS cluster.
func (c *Certs) TLSInfo() transport.TLSInfo {
	return transport.TLSInfo{CertFile: c.ClientCertFile, KeyFile: c.ClientKeyFile, TrustedCAFile: c.CAFile}
}

// The methods below take a nil *Certs as a cluster without TLS: they are the one place that
// decides between plain and TLS members.

// scheme is the scheme of the members' client and peer URLs.
func (c *Certs) scheme() string {
	if c == nil {
		return "http"
	}
	return "https"
}

// etcdFlags turn on mutual TLS on a member's client and peer ports, with one cert for both.
// They exist with the same meaning in etcd 3.5, 3.6 and 3.7.
func (c *Certs) etcdFlags() []string {
	if c == nil {
		return nil
	}
	return []string{
		"--cert-file=" + c.ServerCertFile,
		"--key-file=" + c.ServerKeyFile,
		"--trusted-ca-file=" + c.CAFile,
		"--client-cert-auth",
		"--peer-cert-file=" + c.ServerCertFile,
		"--peer-key-file=" + c.ServerKeyFile,
		"--peer-trusted-ca-file=" + c.CAFile,
		"--peer-client-cert-auth",
	}
}

// clientConfig is the TLS config of the harness's clients; nil without TLS.
func (c *Certs) clientConfig() (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	cfg, err := c.TLSInfo().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("client TLS config from %s, %s, %s: %w", c.CAFile, c.ClientCertFile, c.ClientKeyFile, err)
	}
	return cfg, nil
}
