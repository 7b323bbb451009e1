package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// TLS for real: client and peer TLS with client-certificate auth, as kubeadm sets etcd up.
func TestDoctorTLS(t *testing.T) {
	certs := etcdtest.NewCerts(t, "")
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, TLS: certs})
	ep := c.Member("m1").ClientURL

	// Every probe here makes two TLS handshakes; a -race binary on a loaded machine needs more
	// than doctor's usual 3 s for a member's (the timeouts only bound waits, nothing is timed).
	code, d := doctor(t, []string{ep}, "--cacert", certs.CAFile, "--cert", certs.ClientCertFile, "--key", certs.ClientKeyFile, "--command-timeout", "10s")
	if code != exitOK || len(d.Findings) != 0 || d.Quorum.VotersUp != 3 {
		t.Fatalf("TLS cluster with the right certs: exit %d, %s, %+v", code, d.ids(), d.Quorum)
	}

	// The same flags from ETCDCTL_* variables, as etcdctl users have them.
	t.Setenv("ETCDCTL_ENDPOINTS", ep)
	t.Setenv("ETCDCTL_CACERT", certs.CAFile)
	t.Setenv("ETCDCTL_CERT", certs.ClientCertFile)
	t.Setenv("ETCDCTL_KEY", certs.ClientKeyFile)
	t.Setenv("ETCDCTL_COMMAND_TIMEOUT", "10s")
	if code, out, errOut := runCLI(t, "doctor"); code != exitOK {
		t.Fatalf("from ETCDCTL_* variables: exit %d\n%s%s", code, out, errOut)
	}

	// A wrong CA: one clear line naming the certificate problem, exit 3.
	code, out, errOut := runCLI(t, "doctor", "--endpoints", ep, "--cacert", certs.OtherCAFile, "--cert", certs.ClientCertFile, "--key", certs.ClientKeyFile, "--command-timeout", "10s")
	if code != exitFailed || !strings.Contains(errOut, "certificate signed by unknown authority") || out != "" {
		t.Fatalf("wrong CA: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	// A missing certificate file.
	code, _, errOut = runCLI(t, "doctor", "--endpoints", ep, "--cacert", filepath.Join(t.TempDir(), "nope.crt"))
	if code != exitFailed || !strings.Contains(errOut, "TLS setup") {
		t.Fatalf("missing CA file: exit %d: %s", code, errOut)
	}
}

// Review item 9: the TLS reasons come at once, not after the whole command timeout: a server
// that wants a client certificate says so (TLS 1.3 tells only after the handshake), and an
// https:// endpoint without TLS flags is checked against the system's roots, as etcdctl does.
func TestDoctorTLSReasonsUpFront(t *testing.T) {
	t.Parallel()
	certs := etcdtest.NewCerts(t, "")
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, TLS: certs})
	ep := c.Member("m1").ClientURL
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"no client certificate", []string{"--cacert", certs.CAFile}, "certificate required"},
		{"https without TLS flags", nil, "certificate signed by unknown authority"},
	} {
		// The reason must come from the handshake itself: a reason found only when the command
		// timeout ran out reads "no answer within the command timeout (last connection error:
		// ...)". (No stopwatch: a -race binary on a loaded CI machine took 6.9 s to give the
		// reason, and the timeout is generous so that load cannot fail it.)
		code, out, errOut := runCLI(t, append([]string{"doctor", "--endpoints", ep, "--command-timeout", "30s"}, tc.flags...)...)
		if code != exitFailed || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "command timeout") || out != "" {
			t.Errorf("%s: exit %d\nstdout %q\nstderr %q", tc.name, code, out, errOut)
		}
	}
}

// The operator of incident 2 types one flag: doctor reads kubeadm's etcd manifest.
func TestDoctorDiscoversKubeadm(t *testing.T) {
	t.Parallel()
	certs := etcdtest.NewCerts(t, "")
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, TLS: certs})
	m1 := c.Member("m1")
	// kubeadm's layout: ca.crt, server.crt and healthcheck-client.crt in one pki folder.
	pki := filepath.Join(t.TempDir(), "pki", "etcd")
	os.MkdirAll(pki, 0o700)
	copyFile(t, certs.CAFile, filepath.Join(pki, "ca.crt"), 0o600)
	copyFile(t, certs.ServerCertFile, filepath.Join(pki, "server.crt"), 0o600)
	copyFile(t, certs.ServerKeyFile, filepath.Join(pki, "server.key"), 0o600)
	copyFile(t, certs.ClientCertFile, filepath.Join(pki, "healthcheck-client.crt"), 0o600)
	copyFile(t, certs.ClientKeyFile, filepath.Join(pki, "healthcheck-client.key"), 0o600)
	manifest := filepath.Join(t.TempDir(), "etcd.yaml")
	writeFile(t, manifest, fmt.Sprintf(kubeadmManifest, m1.ClientURL, m1.ClientURL, m1.PeerURL, m1.PeerURL, pki, pki, m1.ClientURL, pki, pki, pki, pki))

	code, out, errOut := runCLI(t, "doctor", "--discover-kubeadm="+manifest, "--command-timeout", "10s")
	if code != exitOK || !strings.Contains(out, "3 of 3 voters up") {
		t.Fatalf("kubeadm discovery: exit %d\n%s%s", code, out, errOut)
	}
	// Without healthcheck-client.crt, the server certificate serves as the client certificate.
	os.Remove(filepath.Join(pki, "healthcheck-client.crt"))
	if code, out, errOut := runCLI(t, "doctor", "--discover-kubeadm="+manifest, "--command-timeout", "10s"); code != exitOK {
		t.Fatalf("kubeadm discovery with the server cert: exit %d\n%s%s", code, out, errOut)
	}
	// A manifest that is not YAML.
	writeFile(t, manifest, "spec: {containers: [unclosed\n")
	if code, _, errOut := runCLI(t, "doctor", "--discover-kubeadm="+manifest); code != exitFailed || !strings.Contains(errOut, "not YAML") {
		t.Fatalf("bad manifest: exit %d: %s", code, errOut)
	}
}

// kubeadmManifest is the etcd static pod kubeadm writes (v1.3x), with the test's URLs and pki.
const kubeadmManifest = `apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: %s
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=%s
    - --listen-peer-urls=%s
    - --initial-advertise-peer-urls=%s
    - --cert-file=%s/server.crt
    - --client-cert-auth=true
    - --data-dir=/var/lib/etcd
    - --feature-gates=InitialCorruptCheck=true
    - --key-file=%s/server.key
    - --listen-client-urls=%s
    - --listen-metrics-urls=http://127.0.0.1:2381
    - --name=master1
    - --peer-cert-file=%s/peer.crt
    - --peer-client-cert-auth=true
    - --peer-key-file=%s/peer.key
    - --peer-trusted-ca-file=%s/ca.crt
    - --snapshot-count=10000
    - --trusted-ca-file=%s/ca.crt
    image: registry.k8s.io/etcd:3.5.16-0
    name: etcd
  hostNetwork: true
`
