package etcdtest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A member killed and restarted under steady load loses none of the writes the cluster
// acknowledged, on the cluster and on the restarted member's own data.
func TestLinkedClusterKeepsAckedWritesThroughMemberKill(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterSpec{Size: 3, Version: Linked})
	ctx := t.Context()
	cli := c.Client(t)

	ledger := StartLoad(ctx, t, cli, LoadSpec{Prefix: "ledger/", Rate: 100, ValueSize: 64})
	time.Sleep(2 * time.Second)
	victim := c.Leader(t) // the harshest member to lose: writes fail until a new election
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	if victim.IsRunning() {
		t.Fatalf("%s still running after Kill", victim.Name)
	}
	time.Sleep(2 * time.Second)
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	if err := victim.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	ledger.Stop()

	acked := ledger.Acked()
	t.Logf("ledger: %d attempts, %d acknowledged, %d failed; killed %s", ledger.Attempts(), len(acked), ledger.Failed(), victim.Name)
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged")
	}
	missing, err := MissingWrites(ctx, cli, acked)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("%d acknowledged writes missing, first %+v", len(missing), missing[0])
	}

	assertCaughtUp(t, victim, acked)
}

// assertCaughtUp waits up to 10 s for m's own data (read serializably) to hold every write in
// acked: a restarted member catches up by itself.
func assertCaughtUp(t *testing.T, m *Member, acked []Write) {
	t.Helper()
	own := m.Client(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		missing, err := MissingWrites(t.Context(), own, acked, clientv3.WithSerializable())
		if err == nil && len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's own data still lacks %d acknowledged writes (err %v)", m.Name, len(missing), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Learner lifecycle on the last release before the membership fix: add, promote, remove,
// each step visible in the member list. The leader's log is compacted first, so the learner
// joins from a snapshot: the path where an idle cluster can stall a new member until a write.
func TestLearnerAddPromoteRemove(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterSpec{Size: 1, Version: V3_5_19, SnapshotCount: 1000})
	// More entries than the snapshot count plus the 5000 the leader keeps for slow followers.
	writeKeys(t, c.Client(t), "fill/", 7500)
	m2 := c.AddMember(t, "m2", AddOptions{Learner: true})
	if !strings.Contains(m2.LogTail(100_000), "applied snapshot") {
		t.Errorf("%s joined without a snapshot; the test no longer covers that path", m2.Name)
	}
	assertMembers(t, c, map[string]bool{"m1": false, "m2": true})

	c.PromoteMember(t, m2)
	assertMembers(t, c, map[string]bool{"m1": false, "m2": false})

	c.RemoveMember(t, m2)
	assertMembers(t, c, map[string]bool{"m1": false})
	if m2.IsRunning() {
		t.Errorf("removed member %s still running", m2.Name)
	}
	if c.Member("m2") != nil || len(c.Members()) != 1 {
		t.Errorf("cluster still lists m2 among %d members", len(c.Members()))
	}
}

// writeKeys writes n keys under prefix from 50 goroutines.
func writeKeys(t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	const writers = 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				if _, err := cli.Put(t.Context(), fmt.Sprintf("%s%06d", prefix, i), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// assertMembers checks the member list against name → isLearner.
func assertMembers(t *testing.T, c *Cluster, want map[string]bool) {
	t.Helper()
	list := c.MemberList(t)
	got := map[string]bool{}
	for _, pm := range list {
		got[pm.Name] = pm.IsLearner
	}
	if len(got) != len(want) {
		t.Fatalf("member list %v, want %v", got, want)
	}
	for name, learner := range want {
		if l, ok := got[name]; !ok || l != learner {
			t.Fatalf("member list %v, want %v", got, want)
		}
	}
}

// A cluster of mixed releases forms, each member runs the release asked for, and a rolling
// restart onto another release keeps every acknowledged write.
func TestMixedVersionsAndRollingUpgrade(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterSpec{Versions: []string{V3_5_21, V3_5_24, V3_6}, SnapshotCount: 1000})
	ctx := t.Context()
	assertVersions(t, c)

	cli := c.Client(t)
	ledger := StartLoad(ctx, t, cli, LoadSpec{Prefix: "upgrade/", Rate: 50})
	m1 := c.Member("m1")
	if err := m1.RestartWith(V3_5_24, nil); err != nil {
		t.Fatal(err)
	}
	if err := m1.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	ledger.Stop()
	assertVersions(t, c)
	if !strings.Contains(m1.LogTail(1000), "etcdtest: ") {
		t.Errorf("%s's log has no etcdtest start marker", m1.Name)
	}

	missing, err := MissingWrites(ctx, cli, ledger.Acked())
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger.Acked()) == 0 || len(missing) > 0 {
		t.Fatalf("%d acknowledged, %d missing", len(ledger.Acked()), len(missing))
	}
}

// assertVersions checks that every member reports the server version of its release.
func assertVersions(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, s := range c.Statuses(ctx) {
		if s.Err != nil {
			t.Fatal(s.Err)
		}
		if want := ServerVersion(s.Member.Version); s.Status.Version != want {
			t.Errorf("%s reports version %s, want %s", s.Member.Name, s.Status.Version, want)
		}
	}
}

// The etcdmedic binary the harness builds runs as a CLI.
func TestEtcdmedicBinaryRuns(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(EtcdmedicBinary(t), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("etcdmedic version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), ServerVersion(Linked)) {
		t.Errorf("etcdmedic version does not mention etcd %s:\n%s", ServerVersion(Linked), out)
	}
}
