package staticpod

import (
	"strings"
	"testing"
)

const manifest = `apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.11:2379
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.11:2379
    - --data-dir=/var/lib/etcd
    - --initial-cluster=master1=https://10.0.0.10:2380,master2=https://10.0.0.11:2380
    - --initial-cluster-state=existing
    - --name=master2
    image: registry.k8s.io/etcd:3.5.16-0
    name: etcd
`

// kubeadm's second master lists two members; a recovery rewrites that list and adds, then
// drops, --force-new-cluster, touching no other line.
func TestEditFlagsChangesOnlyItsFlags(t *testing.T) {
	set := map[string]string{"initial-cluster": "master2=https://10.0.0.11:2380", "initial-cluster-state": "new"}
	forced, err := EditFlags([]byte(manifest), set, true)
	if err != nil {
		t.Fatal(err)
	}
	got := string(forced)
	for _, want := range []string{"    - --initial-cluster=master2=https://10.0.0.11:2380\n", "    - --initial-cluster-state=new\n", "    - --force-new-cluster\n", "    image: registry.k8s.io/etcd:3.5.16-0\n", "    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.11:2379\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("edited manifest lacks %q:\n%s", want, got)
		}
	}
	clean, err := EditFlags(forced, map[string]string{"initial-cluster-state": "existing"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(clean), "force-new-cluster") || len(strings.Split(string(clean), "\n")) != len(strings.Split(manifest, "\n")) {
		t.Errorf("--force-new-cluster not removed, or lines added:\n%s", clean)
	}
	if _, err := EditFlags([]byte("kind: Pod\nspec: {}\n"), set, false); err == nil {
		t.Error("a manifest without an etcd command must be refused")
	}
}
