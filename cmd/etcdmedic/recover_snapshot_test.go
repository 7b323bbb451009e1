package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// Quorum lost, and the operator rebuilds from last night's snapshot instead of from the best
// member: plan states what that loses (every revision after the snapshot), apply restores it
// with etcdutl of the cluster's version, bumping revisions and marking them compacted (as
// Kubernetes needs), quarantines the survivor's old data, and re-adds the others.
func TestRecoverFromSnapshotBumpsRevisions(t *testing.T) {
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
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, kv := range [][2]string{{"/registry/pods/a", "before"}, {"/registry/pods/b", "before"}} {
		if _, err := cli.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	snapFile := filepath.Join(t.TempDir(), "nightly.db")
	// From the leader: it applied both puts before acknowledging them; a follower may not have
	// applied the second yet (seen once: a snapshot with 1 key).
	saveSnapshot(t, c.Leader(t).Client(t), snapFile)
	resp, err := cli.Put(ctx, "/registry/pods/c", "after the snapshot") // lost by the restore, as plan says
	if err != nil {
		t.Fatal(err)
	}
	afterRev := resp.Header.Revision
	c.Member("m3").Kill()
	c.Member("m2").Kill()

	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args := recoverPlanArgs(t, c, planDir, backups)
	for i, a := range args {
		if a == "--etcd-command" {
			args[i+1] = etcdtest.Binary(t, version).Path
		}
	}
	args = append(args, "--from-snapshot", snapFile, "--etcdutl", etcdutl, "--bump-revision", "1000000", "--mark-compacted", "-w", "json")
	code, out, errOut := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	var pr recoverPlanResult
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	src := pr.Plan.FromSnapshot
	if src == nil || src.Revision >= afterRev || pr.Plan.Revision != src.Revision+1000000 {
		t.Fatalf("plan's snapshot %+v, revision %d (the write after the snapshot is at %d)", src, pr.Plan.Revision, afterRev)
	}
	if w := strings.Join(pr.Plan.Assessment.Warnings, "\n"); !strings.Contains(w, "loses") {
		t.Errorf("plan does not state the loss of the writes after the snapshot: %q", w)
	}
	if code, out, errOut := runCLI(t, "recover", "apply", planDir, "--yes"); code != exitOK {
		t.Fatalf("recover apply: exit %d\n%s\n%s", code, out, errOut)
	}

	after := healthyAfterRestore(t, c)
	// A context of its own: plan and apply take most of the first one's 30 s on a busy machine.
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got, err := after.Get(ctx, "/registry/pods/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 2 || got.Header.Revision < src.Revision+1000000 {
		t.Fatalf("after the restore: %d keys at revision %d; want the 2 of the snapshot, revision past %d", len(got.Kvs), got.Header.Revision, src.Revision+1000000)
	}
	// Marked compacted: a watcher resuming from an old revision is told to relist.
	if _, err := after.Get(ctx, "/registry/pods/a", clientv3.WithRev(src.Revision)); err == nil || !strings.Contains(err.Error(), "compacted") {
		t.Errorf("a read at the snapshot's revision: %v, want compacted", err)
	}
	qs, _ := filepath.Glob(c.Member(pr.Plan.Survivor).DataDir + ".etcdmedic-quarantine/*")
	if len(qs) == 0 {
		t.Errorf("the survivor's own data (with the write after the snapshot) is not in quarantine")
	}
}

func saveSnapshot(t *testing.T, cli *clientv3.Client, path string) {
	t.Helper()
	rc, err := cli.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// healthyAfterRestore waits until the restored cluster has three voters up and no finding, and
// returns a client of it (closed when the test ends).
func healthyAfterRestore(t *testing.T, c *etcdtest.Cluster) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, m := range c.Members() {
		eps = append(eps, m.ClientURL)
	}
	if code, d := waitDoctor(t, eps, func(d doctorJSON) bool { return d.Quorum.VotersUp == 3 && len(d.Findings) == 0 }); code != exitOK {
		t.Fatalf("doctor after the restore: exit %d %s", code, d.ids())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
