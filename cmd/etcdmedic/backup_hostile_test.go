package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// The backup commands against a TLS cluster set up as kubeadm does, by an operator who gets
// things wrong first: a wrong CA fails backup now with the certificate problem named, and the
// store holds nothing. With the right certificates: three backups, the oldest verified; the
// newest point checked against the live cluster; prune --keep-last 1 shows its plan (the newest,
// and the newest verified one kept) and removes nothing until --yes, which removes the rest.
func TestBackupOverTLSThenPrune(t *testing.T) {
	t.Parallel()
	version := etcdtest.V3_6
	etcd, etcdutl := restoreToolsOf(t, version)
	certs := etcdtest.NewCerts(t, "")
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: version, TLS: certs})
	ep := c.Members()[0].ClientURL
	dir := filepath.Join(t.TempDir(), "store")
	storeURL := "file://" + dir
	// 10 s per command: a TLS handshake of a -race binary on a loaded machine can take seconds
	// (the timeouts only bound waits; nothing here is timed).
	tls := []string{"--endpoints", ep, "--cacert", certs.CAFile, "--cert", certs.ClientCertFile, "--key", certs.ClientKeyFile, "--command-timeout", "10s"}

	code, out, errOut := runCLI(t, "backup", "now", "--store", storeURL, "--endpoints", ep, "--cacert", certs.OtherCAFile,
		"--cert", certs.ClientCertFile, "--key", certs.ClientKeyFile, "--command-timeout", "10s")
	if code == exitOK || !strings.Contains(errOut, "certificate signed by unknown authority") {
		t.Fatalf("backup now with a wrong CA: exit %d\n%s\n%s", code, out, errOut)
	}
	if objects := filesUnder(t, dir); len(objects) != 0 {
		t.Fatalf("a failed backup left %v in the store", objects)
	}

	cli := c.Client(t)
	var ids []string
	for i := 0; i < 3; i++ {
		code, out, errOut = runCLI(t, append([]string{"backup", "now", "--store", storeURL, "-w", "json"}, tls...)...)
		var taken backupResult
		if code != exitOK || json.Unmarshal([]byte(out), &taken) != nil || taken.Taken == nil {
			t.Fatalf("backup now %d: exit %d\n%s\n%s", i, code, out, errOut)
		}
		ids = append(ids, taken.Taken.ID)
		if _, err := cli.Put(t.Context(), fmt.Sprintf("/registry/configmaps/default/after-%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := runCLI(t, "backup", "verify", ids[0], "--store", storeURL, "--etcd-command", etcd, "--etcdutl", etcdutl); code != exitOK {
		t.Fatalf("backup verify %s: exit %d\n%s\n%s", ids[0], code, out, errOut)
	}
	code, out, errOut = runCLI(t, "backup", "verify", "--point", "--store", storeURL, "--endpoints", ep, "--cacert", certs.OtherCAFile,
		"--cert", certs.ClientCertFile, "--key", certs.ClientKeyFile, "--command-timeout", "10s", "--etcd-command", etcd, "--etcdutl", etcdutl)
	if code == exitOK || !strings.Contains(errOut, "certificate signed by unknown authority") || strings.Count(strings.TrimSpace(errOut), "\n") > 2 {
		t.Fatalf("backup verify --point with a wrong CA: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, append([]string{"backup", "verify", "--point", "--store", storeURL, "--etcd-command", etcd, "--etcdutl", etcdutl}, tls...)...)
	if code != exitOK || !strings.Contains(out, "verified") {
		t.Fatalf("backup verify --point over TLS: exit %d\n%s\n%s", code, out, errOut)
	}

	prune := func(yes bool) backupResult {
		t.Helper()
		args := []string{"backup", "prune", "--store", storeURL, "--keep-last", "1", "-w", "json"}
		if yes {
			args = append(args, "--yes")
		}
		code, out, errOut := runCLI(t, args...)
		var r backupResult
		if code != exitOK || json.Unmarshal([]byte(out), &r) != nil || r.Prune == nil {
			t.Fatalf("backup prune: exit %d\n%s\n%s", code, out, errOut)
		}
		return r
	}
	listed := func() []string {
		t.Helper()
		code, out, errOut := runCLI(t, "backup", "ls", "--store", storeURL, "-w", "json")
		var r backupResult
		if code != exitOK || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("backup ls: exit %d\n%s\n%s", code, out, errOut)
		}
		var got []string
		for _, e := range r.Backups {
			got = append(got, e.ID)
		}
		return got
	}
	plan := prune(false)
	if len(plan.Prune.Remove) != 1 || plan.Prune.Remove[0].ID != ids[1] || plan.Pruned || len(listed()) != 3 {
		t.Fatalf("prune's plan: remove %+v (want only %s), pruned %v; listed after %v", plan.Prune.Remove, ids[1], plan.Pruned, listed())
	}
	if done := prune(true); !done.Pruned {
		t.Fatal("prune --yes did not prune")
	}
	if got, want := listed(), []string{ids[0], ids[2]}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after prune --yes the store lists %v, want %v (the newest verified and the newest)", got, want)
	}
	for _, f := range filesUnder(t, dir) {
		if strings.Contains(f, ids[1]) {
			t.Errorf("prune left %s of the removed backup", f)
		}
	}
}

// filesUnder lists the files under dir, relative to it (none when it is missing).
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	return out
}
