package member

import (
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
	conn := cluster.Conn{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, CommandTimeout: 5 * time.Second}
	var saved *Backup
	crashfs.AfterPowerCut(t, func(mnt string) (err error) {
		saved, err = SaveSnapshot(t.Context(), conn, cluster.Observe(t.Context(), conn), filepath.Join(mnt, "backups", "before-replace"), nil)
		return err
	})
	if err := backup.VerifySnapshot(saved.Path, saved.SHA256); err != nil {
		t.Fatalf("after the power cut, the snapshot: %v", err)
	}
	sum, err := os.ReadFile(saved.Path + ".sha256")
	if err != nil || !strings.HasPrefix(string(sum), saved.SHA256+"  ") {
		t.Fatalf("after the power cut, its .sha256 reads %q (%v), want %s", sum, err, saved.SHA256)
	}
}
