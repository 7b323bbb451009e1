package crashfs

import (
	"errors"
	"path/filepath"
	"testing"
)

// AfterPowerCut is a test's power cut: it mounts a crash filesystem in a temporary folder, runs
// work on it (the mount point given), cuts the power (whatever work did not sync is lost) and
// mounts the same disk again, unmounted when the test ends. It returns the mount point, where
// the test reads what survived. The test is skipped where FUSE cannot be used, and fails when
// work does.
func AfterPowerCut(t testing.TB, work func(mnt string) error) string {
	t.Helper()
	backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	disk, err := Mount(backing, mnt)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := work(mnt); err != nil {
		disk.Unmount()
		t.Fatal(err)
	}
	report, err := disk.Cut(CutOptions{})
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	t.Logf("the power cut dropped: %s", report)
	if disk, err = Mount(backing, mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disk.Unmount() })
	return mnt
}
