package member

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/internal/crashfs"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// The snapshot taken before a membership change or an upgrade is the only backup of that
// moment: once SaveSnapshot returns (and the member is removed, or the step recorded done), a
// power cut keeps it, its .sha256 and the folder made for them, whole.
func TestThePreChangeSnapshotSurvivesAPowerCut(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	disk, err := crashfs.Mount(backing, mnt)
	if errors.Is(err, crashfs.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	conn := cluster.Conn{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, CommandTimeout: 5 * time.Second}
	saved, err := SaveSnapshot(t.Context(), conn, cluster.Observe(t.Context(), conn), filepath.Join(mnt, "backups", "before-replace"), nil)
	if err != nil {
		disk.Unmount()
		t.Fatal(err)
	}
	report, err := disk.Cut(crashfs.CutOptions{})
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	t.Logf("the power cut dropped: %s", report)
	disk, err = crashfs.Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Unmount()
	if err := backup.VerifySnapshot(saved.Path, saved.SHA256); err != nil {
		t.Fatalf("after the power cut, the snapshot: %v", err)
	}
	sum, err := os.ReadFile(saved.Path + ".sha256")
	if err != nil || !strings.HasPrefix(string(sum), saved.SHA256+"  ") {
		t.Fatalf("after the power cut, its .sha256 reads %q (%v), want %s", sum, err, saved.SHA256)
	}
}
