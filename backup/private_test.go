package backup

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// withUmask runs the test under an operator's usual umask (022), which would leave files
// made with 0666 readable by everyone.
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func modeOf(t *testing.T, p string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// A backup holds the cluster's Secrets: its copies are 0600 in 0700 folders, whatever the mode
// bits of the source and the umask.
func TestCopiesArePrivate(t *testing.T) {
	withUmask(t, 0o022)
	src := t.TempDir()
	for path, mode := range map[string]fs.FileMode{"member/snap/db": 0o644, "member/wal/0.wal": 0o666, "member/wal/1.wal": 0o600} {
		p := filepath.Join(src, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(path), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	summed := filepath.Join(t.TempDir(), "summed")
	files, _, err := CopyTreeSummed(src, summed, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if err := CopyTree(src, plain, files); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{summed, plain} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			want := fs.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			}
			if got := modeOf(t, p); got != want && p != root {
				t.Errorf("%s is %o, want %o", p, got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Over a file an interrupted run left readable by all, too.
	dst := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(dst, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CopyFile(filepath.Join(src, "member/snap/db"), dst, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := modeOf(t, dst); got != 0o600 {
		t.Errorf("CopyFile over a 0644 file left it %o", got)
	}
}

func TestMkdirAllSyncedMakesPrivateFolders(t *testing.T) {
	withUmask(t, 0o022)
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "backups", "m1.partial", "data")
	if err := MkdirAllSynced(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(base, "backups"), filepath.Join(base, "backups", "m1.partial"), dir} {
		if got := modeOf(t, d); got != 0o700 {
			t.Errorf("%s is %o, want 0700", d, got)
		}
	}
	if got := modeOf(t, base); got != 0o755 {
		t.Errorf("the existing parent %s changed to %o", base, got)
	}
	// Again on what exists: nothing to do, no error.
	if err := MkdirAllSynced(dir); err != nil {
		t.Fatal(err)
	}
	// A file in the way is an error, not a silent success.
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllSynced(filepath.Join(file, "data")); err == nil {
		t.Error("MkdirAllSynced under a file succeeded")
	}
}
