package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// Every member's disk lost, the cluster rebuilt from the store: backup now under write load,
// backup ls and verify (restored into a scratch member, hashes equal), then all three data dirs
// wiped, restore (Kubernetes-safe: revisions bumped, old ones compacted) makes a data dir for
// each from the backup's own membership, and the members started on them are the cluster again
// with every write acknowledged before the backup's revision.
func TestBackupThenTotalLoss(t *testing.T) {
	t.Parallel()
	version := etcdtest.V3_6
	etcd, etcdutl := restoreToolsOf(t, version)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: version})
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir)
	}
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 40})
	waitAcked(t, ledger, 40)
	storeURL := "file://" + filepath.Join(t.TempDir(), "store")

	code, out, errOut := runCLI(t, "backup", "now", "--store", storeURL, "--endpoints", c.Members()[1].ClientURL, "-w", "json")
	var taken backupResult
	if code != exitOK || json.Unmarshal([]byte(out), &taken) != nil || taken.Taken == nil {
		t.Fatalf("backup now: exit %d\n%s\n%s", code, out, errOut)
	}
	waitAcked(t, ledger, len(ledger.Acked())+20) // after the backup: lost with the disks
	ledger.Stop()

	code, out, errOut = runCLI(t, "backup", "ls", "--store", storeURL, "-w", "json")
	var listed backupResult
	if code != exitOK || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Backups) != 1 || listed.Backups[0].State() != "unverified" {
		t.Fatalf("backup ls: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "backup", "verify", "--store", storeURL, "--etcd-command", etcd, "--etcdutl", etcdutl)
	if code != exitOK || !strings.Contains(out, "verified") {
		t.Fatalf("backup verify: exit %d\n%s\n%s", code, out, errOut)
	}

	for _, m := range c.Members() {
		m.Kill()
		if err := os.RemoveAll(m.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	var restoreArgs []string
	for _, m := range c.Members() {
		restoreArgs = append(restoreArgs, "--data-dir", m.Name+"="+m.DataDir)
	}
	// A data dir that is not empty is never written over.
	os.MkdirAll(filepath.Join(c.Members()[0].DataDir, "member"), 0o700)
	if code, _, errOut := runCLI(t, append([]string{"restore", "--store", storeURL, "--etcdutl", etcdutl}, restoreArgs...)...); code != exitFailed || !strings.Contains(errOut, "not empty") {
		t.Fatalf("restore over a data dir: exit %d %s", code, errOut)
	}
	os.RemoveAll(c.Members()[0].DataDir)
	code, out, errOut = runCLI(t, append([]string{"restore", "--store", storeURL, "--etcdutl", etcdutl, "--bump-revision", "1000000000", "--mark-compacted"}, restoreArgs...)...)
	if code != exitOK || !strings.Contains(out, "RESTORED") {
		t.Fatalf("restore: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, m := range c.Members() {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	after := healthyAfterRestore(t, c)
	var before []etcdtest.Write
	for _, w := range ledger.Acked() {
		if w.Revision <= taken.Taken.Revision {
			before = append(before, w)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	missing, err := etcdtest.MissingWrites(ctx, after, before)
	if err != nil || len(missing) != 0 || len(before) == 0 {
		t.Fatalf("%d of the %d writes acknowledged before the backup (revision %d) lost: %v", len(missing), len(before), taken.Taken.Revision, err)
	}
	got, err := after.Get(ctx, "x", clientv3.WithSerializable())
	if err != nil || got.Header.Revision < 1000000000 {
		t.Errorf("after the restore the revision is %v (%v): want it bumped past 1000000000", got, err)
	}
	t.Logf("restored from backup %s: %d writes acknowledged before it all there", taken.Taken.ID, len(before))
}

// Quorum lost with the survivor's data untrusted: recover plan --from-backup takes the newest
// backup from the store (downloaded and checked beside the plan) as --from-snapshot would.
func TestRecoverFromBackup(t *testing.T) {
	t.Parallel()
	version := etcdtest.V3_6
	etcdutl, err := etcdbin.EtcdutlPath(t.Context(), version)
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: version})
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.Client(t).Put(ctx, "/registry/configmaps/default/kept", "in the backup"); err != nil {
		t.Fatal(err)
	}
	storeURL := "file://" + filepath.Join(t.TempDir(), "store")
	if code, out, errOut := runCLI(t, "backup", "now", "--store", storeURL, "--endpoints", c.Leader(t).ClientURL); code != exitOK {
		t.Fatalf("backup now: exit %d\n%s\n%s", code, out, errOut)
	}
	c.Member("m3").Kill()
	c.Member("m2").Kill()
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args := recoverPlanArgs(t, c, planDir, backups)
	for i, a := range args {
		if a == "--etcd-command" {
			args[i+1] = etcdtest.Binary(t, version).Path
		}
	}
	args = append(args, "--from-backup", storeURL, "--etcdutl", etcdutl, "--bump-revision", "1000000", "--mark-compacted")
	if code, out, errOut := runCLI(t, args...); code != exitOK || !strings.Contains(errOut, "downloaded and checked") {
		t.Fatalf("recover plan --from-backup: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "recover", "apply", planDir, "--yes"); code != exitOK {
		t.Fatalf("recover apply: exit %d\n%s\n%s", code, out, errOut)
	}
	after := healthyAfterRestore(t, c)
	got, err := after.Get(ctx, "/registry/configmaps/default/kept")
	if err != nil || len(got.Kvs) != 1 || got.Header.Revision < 1000000 {
		t.Fatalf("after recover --from-backup: %v %v", got, err)
	}
}

// backup now killed (SIGKILL) while its snapshot is on its way into the store leaves no listed
// backup; the next one is listed whole.
func TestBackupKilledMidUploadIsNotListed(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	value := strings.Repeat("x", 100<<10)
	for i := 0; i < 400; i++ { // a db of about 40 MB: its upload takes a moment
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/secrets/s%04d", i), value+fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "store")
	storeURL := "file://" + dir
	run := exec.Command(etcdtest.EtcdmedicBinary(t), "backup", "now", "--store", storeURL, "--endpoints", c.Members()[0].ClientURL)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	for i := 0; i < 20000 && !killed; i++ {
		ents, _ := os.ReadDir(filepath.Join(dir, "full"))
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".json") {
				run.Process.Kill()
				killed = true
				break
			}
		}
		if !killed {
			time.Sleep(time.Millisecond)
		}
	}
	run.Wait()
	if !killed {
		t.Fatal("backup now never started writing into the store")
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "full"))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	code, out, errOut := runCLI(t, "backup", "ls", "--store", storeURL, "-w", "json")
	var listed backupResult
	if code != exitOK || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Backups) != 0 {
		t.Fatalf("after a kill mid-upload (the store holds %v): exit %d, listed %+v\n%s", names, code, listed.Backups, errOut)
	}
	if code, out, errOut := runCLI(t, "backup", "now", "--store", storeURL, "--endpoints", c.Members()[0].ClientURL); code != exitOK {
		t.Fatalf("backup now after the kill: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "backup", "ls", "--store", storeURL, "-w", "json")
	if code != exitOK || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Backups) != 1 {
		t.Fatalf("the next backup: exit %d\n%s", code, out)
	}
	t.Logf("killed with %v in the store: nothing listed", names)
}

// restoreToolsOf are the etcd server and the etcdutl of version, for the scratch members and
// restores the backup commands run.
func restoreToolsOf(t *testing.T, version string) (etcd, etcdutl string) {
	t.Helper()
	etcdutl, err := etcdbin.EtcdutlPath(t.Context(), version)
	if err != nil {
		t.Fatal(err)
	}
	return etcdtest.Binary(t, version).Path, etcdutl
}
