package crashfs

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// etcd on a crash filesystem keeps every put it acknowledged through a power cut: it fsyncs
// its WAL before it answers, so what the cut drops was never acknowledged. A steady load runs
// until the kill, so puts are in flight when the power goes.
func TestEtcdKeepsEveryAcknowledgedPutThroughAPowerCut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd")
	}
	clusterDir, backing := t.TempDir(), t.TempDir()
	dataDir := filepath.Join(clusterDir, "m1.etcd") // the harness's data dir for member m1
	f := mountAt(t, backing, dataDir)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Version: etcdtest.V3_6, Dir: clusterDir})
	m := c.Member("m1")

	cli := m.Client(t)
	load := etcdtest.StartLoad(t.Context(), t, cli, etcdtest.LoadSpec{Prefix: "load/", Rate: 200})
	const puts = 200
	for i := range puts {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		_, err := cli.Put(ctx, key(i), value(i))
		cancel()
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	t.Logf("after %d acknowledged puts a cut would drop %+v", puts, f.Unsynced())

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	report, err := f.Cut(CutOptions{})
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	t.Logf("%s; files %v; entries %v", report, report.Files, report.Entries)
	if err := load.Stop(); err != nil {
		t.Fatal(err)
	}

	mountAt(t, backing, dataDir)
	t.Cleanup(func() { _ = m.Kill() }) // before the mount's cleanup unmounts
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := m.Client(t)
	missing, err := etcdtest.MissingWrites(ctx, restarted, load.Acked())
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("%d of the load's %d acknowledged puts lost in the power cut, first %+v", len(missing), len(load.Acked()), missing[0])
	}
	resp, err := restarted.Get(ctx, "crashfs/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	for i := range puts {
		if got[key(i)] != value(i) {
			t.Errorf("acknowledged put %s = %s after the power cut: %q, want %q", key(i), value(i), got[key(i)], value(i))
		}
	}
}

func key(i int) string   { return fmt.Sprintf("crashfs/%03d", i) }
func value(i int) string { return fmt.Sprintf("value-%d", i) }
