package recovery

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeMemberDir lays out the files a member's backup must hold (a WAL segment and a db).
func fakeMemberDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	for path, size := range map[string]int{"member/wal/0000000000000000-0000000000000000.wal": 1 << 20, "member/snap/db": 2 << 20} {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte(name), size/len(name)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The survivor is backed up first; the others in the background while rejoin steps wait for
// them, one by one. Under -race this found the map read after a delete that hung apply.
func TestBackgroundBackupsAreWaitedForOneByOne(t *testing.T) {
	p := &Plan{Survivor: "m1", BackupDir: t.TempDir()}
	for _, name := range []string{"m1", "m2", "m3", "m4"} {
		p.Members = append(p.Members, PlanMember{Name: name, DataDir: fakeMemberDir(t, name)})
	}
	var out bytes.Buffer
	a := &Applier{Plan: p, Out: &syncWriter{w: &out}}
	if err := a.backupFirst(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Members[1:] {
		if err := a.ensureBackup(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := VerifyBackups(p); err != nil {
		t.Fatal(err)
	}
}

// A member's backup without its WAL (a link to a disk that is not mounted) must fail, never
// "verify" an empty copy.
func TestBackupWithoutWALFails(t *testing.T) {
	dir := fakeMemberDir(t, "m1")
	wal := filepath.Join(dir, "member", "wal")
	os.RemoveAll(wal)
	if err := os.Symlink(filepath.Join(t.TempDir(), "unmounted"), wal); err != nil {
		t.Fatal(err)
	}
	p := &Plan{Survivor: "m1", BackupDir: t.TempDir(), Members: []PlanMember{{Name: "m1", DataDir: dir}}}
	a := &Applier{Plan: p, Out: &syncWriter{w: &bytes.Buffer{}}}
	err := a.backupOne(t.Context(), p.Members[0], 1)
	if err == nil || !strings.Contains(err.Error(), "member/wal") {
		t.Fatalf("backup of a member whose WAL link dangles: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.BackupDir, "m1")); err == nil {
		t.Fatal("a failed backup was left as if complete")
	}
}
