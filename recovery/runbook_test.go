package recovery

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/runtime/runbook"
)

// A member on a node etcdmedic cannot act on, whose WAL lives apart: the printed commands
// archive and move aside its WAL dir too, never only its data dir.
func TestRunbookMemberWithItsWALApartIsArchivedAndMovedWhole(t *testing.T) {
	dir := t.TempDir()
	m := PlanMember{Name: "m2", DataDir: "/var/lib/etcd", WALDir: "/mnt/wal/etcd", Runbook: runbook.Process}
	var out bytes.Buffer
	a := &Applier{Plan: &Plan{Members: []PlanMember{m}, BackupDir: filepath.Join(dir, "backups"), CreatedAt: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)},
		Operator: runbook.NewOperator(strings.NewReader("done\ndone\n"), &out), Out: &bytes.Buffer{}}
	if err := a.operatorBackup(m); err != nil {
		t.Fatal(err)
	}
	m.DataDir = filepath.Join(dir, "gone") // moved aside on its node: not there
	if err := a.operatorQuarantine(m, &Report{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-cf /var/backups/etcdmedic-m2-20261202T000000Z-wal.tar etcd", "tar -C /mnt/wal -cf", "mv -n /mnt/wal/etcd /mnt/wal/etcd.etcdmedic-quarantine-20261202T000000Z"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the runbook lacks %q:\n%s", want, out.String())
		}
	}
}
