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

// Hand-written static pods: the edit either rewrites the flag whole, or refuses and says how
// to write it; it never leaves a stray item etcd refuses ("is not a valid flag").
func TestEditFlagsOnHandWrittenManifests(t *testing.T) {
	set := map[string]string{"initial-cluster": "master2=https://10.0.0.11:2380", "initial-cluster-state": "new"}
	withCommand := func(items string) string {
		return strings.Replace(manifest, "    - --advertise-client-urls=https://10.0.0.11:2379\n", items, 1)
	}
	for _, tc := range []struct {
		situation string
		manifest  string
		force     bool
		err       string   // in the error; "" : edited
		want      []string // in the edited manifest
		not       []string // not in it
	}{
		{"--initial-cluster and its value as two items", withCommand("    - --initial-cluster\n    - m=https://10.0.0.9:2380\n"), false,
			"--initial-cluster and its value are two items", nil, nil},
		{"another flag as two items is left as it is", withCommand("    - --advertise-client-urls\n    - https://10.0.0.11:2379\n"), true, "",
			[]string{"    - --advertise-client-urls\n    - https://10.0.0.11:2379\n", "    - --force-new-cluster\n"}, nil},
		{"single-dash flags are rewritten whole", strings.Replace(strings.Replace(manifest, "- --initial-cluster=", "- -initial-cluster=", 1), "- --initial-cluster-state=existing", "- -initial-cluster-state=existing\n    - -force-new-cluster", 1), false, "",
			[]string{"    - --initial-cluster=master2=https://10.0.0.11:2380\n", "    - --initial-cluster-state=new\n"}, []string{"10.0.0.10", "force-new-cluster", "existing"}},
		{"the env: sets a flag etcdmedic edits: etcd would refuse both", manifest + "    env:\n    - name: ETCD_INITIAL_CLUSTER_STATE\n      value: existing\n", false,
			"ETCD_INITIAL_CLUSTER_STATE", nil, nil},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			edited, err := EditFlags([]byte(tc.manifest), set, tc.force)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error with %q, got %v\n%s", tc.err, err, edited)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !strings.Contains(string(edited), want) {
					t.Errorf("edited manifest lacks %q:\n%s", want, edited)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(string(edited), not) {
					t.Errorf("edited manifest still has %q:\n%s", not, edited)
				}
			}
		})
	}
}
