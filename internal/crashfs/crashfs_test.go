package crashfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mountForTest mounts a crash filesystem over a new backing dir; see mountAt.
func mountForTest(t *testing.T) (f *FS, mnt, backing string) {
	t.Helper()
	backing = t.TempDir()
	mnt = filepath.Join(t.TempDir(), "mnt")
	return mountAt(t, backing, mnt), mnt, backing
}

// mountAt mounts a crash filesystem over backing at mnt, skips the test where FUSE cannot be
// used, and unmounts when the test ends (forcibly, through a cut, if something holds it).
func mountAt(t *testing.T, backing, mnt string) *FS {
	t.Helper()
	f, err := Mount(backing, mnt)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Errorf("unmount at the end of the test: %v", err)
			if _, err := f.Cut(CutOptions{}); err != nil {
				t.Errorf("forced unmount: %v", err)
			}
		}
	})
	return f
}

// cutAndRemount cuts the power, mounts the backing dir again and returns what the cut dropped.
func cutAndRemount(t *testing.T, f *FS, backing, mnt string, opts CutOptions) *CutReport {
	t.Helper()
	report, err := f.Cut(opts)
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	t.Logf("%s; files %v; entries %v", report, report.Files, report.Entries)
	mountAt(t, backing, mnt)
	return report
}

// writeFile creates or replaces path with content, without any fsync.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSynced writes path and fsyncs the file (not its directory).
func writeSynced(t *testing.T, path, content string) {
	t.Helper()
	writeFile(t, path, content)
	fsync(t, path)
}

// fsync opens path (a file or a directory) and fsyncs it.
func fsync(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
}

// contentOf returns path's content, or "<missing>".
func contentOf(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func wantContent(t *testing.T, path, want string) {
	t.Helper()
	if got := contentOf(t, path); got != want {
		t.Errorf("%s after the cut = %q, want %q", filepath.Base(path), abbreviate(got), abbreviate(want))
	}
}

func abbreviate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func TestMountRefusesAMountpointInsideItsBackingDir(t *testing.T) {
	backing := t.TempDir()
	_, err := Mount(backing, filepath.Join(backing, "mnt"))
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Mount inside its backing dir: err = %v, want a refusal", err)
	}
}

// The stash that keeps removed entries is in the backing dir, and never on the mount.
func TestStashIsHiddenFromTheMount(t *testing.T) {
	_, mnt, backing := mountForTest(t)
	writeFile(t, filepath.Join(mnt, "gone"), "x")
	if err := os.Remove(filepath.Join(mnt, "gone")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(backing, stashName)); err != nil {
		t.Fatalf("stash in the backing dir: %v", err)
	}
	entries, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("mount lists %q, want nothing", e.Name())
	}
	if _, err := os.Stat(filepath.Join(mnt, stashName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of the stash through the mount: %v, want not found", err)
	}
	if err := os.Mkdir(filepath.Join(mnt, stashName), 0o755); err == nil {
		t.Errorf("mkdir %s through the mount succeeded", stashName)
	}
}

// A clean unmount is a clean shutdown: nothing is lost, synced or not.
func TestCleanUnmountKeepsEverything(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	writeFile(t, filepath.Join(mnt, "never-synced"), "kept")
	if got := f.Unsynced(); got.Files != 1 || got.Entries != 1 || got.Bytes != 4 {
		t.Errorf("Unsynced() = %+v, want 1 file, 4 bytes, 1 entry", got)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	mountAt(t, backing, mnt)
	wantContent(t, filepath.Join(mnt, "never-synced"), "kept")
}

// A panic in an operation answers EIO and is reported by Unmount, instead of killing the
// test process that serves the mount.
func TestPanickingOperationAnswersEIOAndIsReported(t *testing.T) {
	f, _, _ := mountForTest(t)
	errno := f.do("test", func() syscall.Errno { panic("boom") })
	if errno != syscall.EIO {
		t.Errorf("panicking operation answered %v, want EIO", errno)
	}
	if err := f.Unmount(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Unmount after a panic: %v, want the panic reported", err)
	}
}
