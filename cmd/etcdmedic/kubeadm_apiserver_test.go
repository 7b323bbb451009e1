package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/kubeapi"
	"github.com/etcdmedic/etcdmedic/kubeworkload"
)

// controlPlane is the kube-apiservers of kubeadm masters, each a static pod beside its etcd.
type controlPlane struct {
	creds   *kubeapi.Credentials
	servers []kubeapi.Server
	bin     string
}

// startKubeadmAPIServers writes a kube-apiserver static pod manifest on each master (its
// --etcd-servers its own etcd, as kubeadm writes it), runs each through a kubelet double, and
// waits until every apiserver is ready.
func startKubeadmAPIServers(t *testing.T, root string, ms []master) *controlPlane {
	t.Helper()
	cp := &controlPlane{bin: etcdtest.KubeAPIServerBinary(t)}
	creds, err := kubeapi.NewCredentials(filepath.Join(root, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	cp.creds = creds
	ports := freePortsForTest(t, len(ms))
	for i, m := range ms {
		s := kubeapi.Server{
			Name: m.name, URL: fmt.Sprintf("https://127.0.0.1:%d", ports[i]), Port: ports[i],
			EtcdServers: []string{m.client}, CertDir: filepath.Join(filepath.Dir(filepath.Dir(m.manifest)), "pki"),
		}
		cp.servers = append(cp.servers, s)
		cp.writeManifest(t, m, s)
		startKubelet(t, cp.manifest(m), []string{cp.bin})
	}
	cp.waitReady(t)
	return cp
}

func (cp *controlPlane) manifest(m master) string {
	return filepath.Join(filepath.Dir(m.manifest), "kube-apiserver.yaml")
}

// writeManifest writes m's kube-apiserver manifest, as kubeadm init and join --control-plane do.
func (cp *controlPlane) writeManifest(t *testing.T, m master, s kubeapi.Server) {
	t.Helper()
	var cmd strings.Builder
	cmd.WriteString("    - kube-apiserver\n")
	for _, a := range s.Args(cp.creds) {
		fmt.Fprintf(&cmd, "    - %s\n", a)
	}
	writeFile(t, cp.manifest(m), `apiVersion: v1
kind: Pod
metadata:
  labels:
    component: kube-apiserver
    tier: control-plane
  name: kube-apiserver
  namespace: kube-system
spec:
  containers:
  - command:
`+cmd.String()+`    image: registry.k8s.io/kube-apiserver:v1.34.2
    name: kube-apiserver
  hostNetwork: true
  priorityClassName: system-node-critical
`)
}

// rejoin writes the manifest of the master back (kubeadm join --control-plane).
func (cp *controlPlane) rejoin(t *testing.T, m master) {
	for _, s := range cp.servers {
		if s.Name == m.name {
			cp.writeManifest(t, m, s)
		}
	}
}

// waitReady waits until every apiserver says it is ready.
func (cp *controlPlane) waitReady(t *testing.T) {
	t.Helper()
	for _, s := range cp.servers {
		if _, err := kubeapi.WaitReady(t.Context(), s.URL, cp.creds, 2*time.Minute); err != nil {
			t.Fatalf("%v (its log: %s)", err, filepath.Join(filepath.Dir(s.CertDir), "manifests", "kube-apiserver.yaml.log"))
		}
	}
}

// startWorkload runs the Kubernetes workload through every apiserver.
func (cp *controlPlane) startWorkload(t *testing.T) *kubeworkload.Workload {
	t.Helper()
	w, err := kubeworkload.Start(t.Context(), kubeworkload.Spec{APIServers: cp.servers, Credentials: cp.creds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// kubeVerify checks the Kubernetes workload against etcd at eps.
func kubeVerify(t *testing.T, w *kubeworkload.Workload, eps []string, opts kubeworkload.VerifyOptions) kubeworkload.Verdict {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	opts.Etcd = cli
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	v, err := w.Verify(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
