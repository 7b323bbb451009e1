package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guard --from-config /etc/kubernetes/manifests/etcd.yaml reads naturally as "its config": it
// used to give <manifests>/default.etcd, EMPTY, safe to start, exit 0. It is one clear line now,
// naming the data dir the manifest runs etcd on, and nothing is judged.
func TestFromConfigRefusesAKubernetesManifest(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "etcd.yaml")
	os.WriteFile(manifest, []byte("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: etcd\n    command:\n    - etcd\n    - --name=master1\n    - --data-dir=/var/lib/etcd\n"), 0o600)
	for _, args := range [][]string{
		{"guard", "--from-config", manifest, "--endpoints", "127.0.0.1:1"},
		{"inspect", "--from-config", manifest},
	} {
		code, out, errOut := runCLI(t, args...)
		if code == 0 || !strings.Contains(errOut, "is a Kubernetes manifest (kind: Pod)") || !strings.Contains(errOut, "/var/lib/etcd") || strings.Contains(out, "default.etcd") {
			t.Errorf("%s: exit %d\nstdout %q\nstderr %q", strings.Join(args, " "), code, out, errOut)
		}
	}
}
