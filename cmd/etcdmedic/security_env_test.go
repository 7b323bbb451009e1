package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --pass-env takes etcd's own variables only, set, and says so before anything is probed,
// stopped or written.
func TestPassEnvRefusedBeforeAnything(t *testing.T) {
	t.Setenv("ETCDCTL_PASSWORD", "s3cret")
	os.Unsetenv("ETCD_NOT_SET_HERE")
	dir := t.TempDir()
	planDir := filepath.Join(dir, "plan")
	dataDir := filepath.Join(dir, "m1.etcd")
	for _, name := range []string{"ETCDCTL_PASSWORD", "ETCD_NOT_SET_HERE"} {
		for _, args := range [][]string{
			{"recover", "plan", "--data-dir", "m1=" + dataDir, "--backup-dir", filepath.Join(dir, "backups"), "--plan-dir", planDir},
			{"upgrade", "plan", "--to", "v3.6.16", "--data-dir", "m1=" + dataDir, "--backup-dir", filepath.Join(dir, "backups"), "--plan-dir", planDir, "--endpoints", "127.0.0.1:1"},
			{"guard", "--data-dir", dataDir, "--name", "m1", "--peer-urls", "http://127.0.0.1:1", "--client-urls", "http://127.0.0.1:2", "--fix", "--rejoin", "--start", "--endpoints", "127.0.0.1:1"},
			{"member", "add", "--name", "m1", "--peer-urls", "http://127.0.0.1:1", "--client-urls", "http://127.0.0.1:2", "--data-dir", dataDir, "--start", "--endpoints", "127.0.0.1:1"},
		} {
			code, out, errOut := runCLI(t, append(args, "--pass-env", name)...)
			if code != exitFailed || !strings.Contains(errOut, "--pass-env") || strings.Contains(out+errOut, "s3cret") {
				t.Errorf("%s --pass-env %s: exit %d\nstdout %q\nstderr %q", strings.Join(args[:2], " "), name, code, out, errOut)
			}
		}
	}
	for _, p := range []string{planDir, dataDir} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created by a refused command", p)
		}
	}
}
