package archive_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/internal/crashfs"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// A restore that reported success is on the disk: the power cut right after it, the data dir
// holds the whole member, and etcd starts on it at the revision restored. (Before, nothing of
// what etcdutl wrote was synced but the data dir's own entries: a cut could take the data dir.)
func TestARestoredDataDirSurvivesAPowerCut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, st, _, conn := aMemberAndAStore(t, ctx)
	cli := c.Client(t)
	for i := range 20 {
		if _, err := cli.Put(ctx, "k"+string(rune('a'+i)), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	p, err := archive.Choose(ctx, st, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	etcdutl, err := etcdbin.EtcdutlPath(ctx, etcdtest.V3_6)
	if err != nil {
		t.Fatal(err)
	}
	var dataDir string
	crashfs.AfterPowerCut(t, func(mnt string) error {
		dataDir = filepath.Join(mnt, "var", "lib", "etcd")
		_, err := archive.Restore(ctx, st, p, []archive.Target{{Name: "r1", DataDir: dataDir, PeerURL: "http://127.0.0.1:1"}},
			archive.RestoreOptions{Etcdutl: []string{etcdutl}, Etcd: []string{etcdtest.Binary(t, etcdtest.V3_6).Path}, Scratch: t.TempDir()})
		return err
	})
	restored := etcdtest.StartOn(t, etcdtest.V3_6, "r1", dataDir)
	got, err := restored.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Revision != p.Revision || got.Count != 20 {
		t.Fatalf("after the power cut the restored member serves %d keys at revision %d, want 20 at %d", got.Count, got.Header.Revision, p.Revision)
	}
}
