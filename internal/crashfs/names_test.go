package crashfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A new file needs its parent directory fsynced to exist after a cut; its own fsync makes
// only its data durable.
func TestNewFileNeedsItsDirectoryFsynced(t *testing.T) {
	t.Run("without a directory fsync it is gone", func(t *testing.T) {
		f, mnt, backing := mountForTest(t)
		writeSynced(t, filepath.Join(mnt, "new"), "data")
		report := cutAndRemount(t, f, backing, mnt, CutOptions{})
		wantContent(t, filepath.Join(mnt, "new"), "<missing>")
		if !slices.Equal(report.Entries, []string{"create new"}) {
			t.Errorf("entries undone = %q, want [create new]", report.Entries)
		}
	})
	t.Run("with a directory fsync it stays, with its data", func(t *testing.T) {
		f, mnt, backing := mountForTest(t)
		writeSynced(t, filepath.Join(mnt, "new"), "data")
		fsync(t, mnt)
		cutAndRemount(t, f, backing, mnt, CutOptions{})
		wantContent(t, filepath.Join(mnt, "new"), "data")
	})
	t.Run("with a directory fsync but no file fsync it stays, empty", func(t *testing.T) {
		f, mnt, backing := mountForTest(t)
		writeFile(t, filepath.Join(mnt, "new"), "data")
		fsync(t, mnt)
		cutAndRemount(t, f, backing, mnt, CutOptions{})
		wantContent(t, filepath.Join(mnt, "new"), "")
	})
}

// The write-a-tmp-file-then-rename pattern: without a directory fsync a cut brings back the
// old file and the tmp file; with one the new content stays.
func TestRenameOverAFileNeedsADirectoryFsync(t *testing.T) {
	setup := func(t *testing.T) (*FS, string, string) {
		f, mnt, backing := mountForTest(t)
		writeSynced(t, filepath.Join(mnt, "config"), "old")
		writeSynced(t, filepath.Join(mnt, "config.tmp"), "new")
		fsync(t, mnt)
		if err := os.Rename(filepath.Join(mnt, "config.tmp"), filepath.Join(mnt, "config")); err != nil {
			t.Fatal(err)
		}
		return f, mnt, backing
	}
	t.Run("without a directory fsync both files are back", func(t *testing.T) {
		f, mnt, backing := setup(t)
		cutAndRemount(t, f, backing, mnt, CutOptions{})
		wantContent(t, filepath.Join(mnt, "config"), "old")
		wantContent(t, filepath.Join(mnt, "config.tmp"), "new")
	})
	t.Run("with a directory fsync the new content stays", func(t *testing.T) {
		f, mnt, backing := setup(t)
		fsync(t, mnt)
		cutAndRemount(t, f, backing, mnt, CutOptions{})
		wantContent(t, filepath.Join(mnt, "config"), "new")
		wantContent(t, filepath.Join(mnt, "config.tmp"), "<missing>")
	})
}

// A rename between two directories is undone by a cut unless one of them was fsynced after it.
func TestRenameAcrossDirectoriesNeedsADirectoryFsync(t *testing.T) {
	for _, synced := range []string{"", "from", "to"} {
		t.Run("fsynced "+synced, func(t *testing.T) {
			f, mnt, backing := mountForTest(t)
			for _, dir := range []string{"from", "to"} {
				if err := os.Mkdir(filepath.Join(mnt, dir), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			writeSynced(t, filepath.Join(mnt, "from", "file"), "moved")
			fsync(t, filepath.Join(mnt, "from"))
			fsync(t, mnt)
			if err := os.Rename(filepath.Join(mnt, "from", "file"), filepath.Join(mnt, "to", "file")); err != nil {
				t.Fatal(err)
			}
			if synced != "" {
				fsync(t, filepath.Join(mnt, synced))
			}
			cutAndRemount(t, f, backing, mnt, CutOptions{})
			if synced == "" {
				wantContent(t, filepath.Join(mnt, "from", "file"), "moved")
				wantContent(t, filepath.Join(mnt, "to", "file"), "<missing>")
			} else {
				wantContent(t, filepath.Join(mnt, "from", "file"), "<missing>")
				wantContent(t, filepath.Join(mnt, "to", "file"), "moved")
			}
		})
	}
}

// An unlink without a directory fsync is undone by a cut: the file is back with its data.
// With one it is gone, and so is its stashed copy.
func TestUnlinkNeedsADirectoryFsync(t *testing.T) {
	for _, dirSynced := range []bool{false, true} {
		t.Run(fmt.Sprintf("directory fsynced %v", dirSynced), func(t *testing.T) {
			f, mnt, backing := mountForTest(t)
			path := filepath.Join(mnt, "victim")
			writeSynced(t, path, "still here")
			fsync(t, mnt)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			want := "still here"
			if dirSynced {
				fsync(t, mnt)
				want = "<missing>"
				if stashed, err := os.ReadDir(filepath.Join(backing, stashName)); err != nil || len(stashed) != 0 {
					t.Errorf("stash after the unlink was made durable: %v, %v; want it empty", stashed, err)
				}
			}
			cutAndRemount(t, f, backing, mnt, CutOptions{})
			wantContent(t, path, want)
		})
	}
}

// A mkdir without a directory fsync is undone by a cut, and so is a rmdir.
func TestMkdirAndRmdirNeedADirectoryFsync(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	if err := os.Mkdir(filepath.Join(mnt, "old"), 0o700); err != nil {
		t.Fatal(err)
	}
	fsync(t, mnt)
	if err := os.Remove(filepath.Join(mnt, "old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(mnt, "new"), 0o755); err != nil {
		t.Fatal(err)
	}
	cutAndRemount(t, f, backing, mnt, CutOptions{})
	if fi, err := os.Stat(filepath.Join(mnt, "old")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("removed directory after the cut: %v, %v; want it back, mode 0700", fi, err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "new")); !os.IsNotExist(err) {
		t.Errorf("new directory after the cut: %v, want it gone", err)
	}
}

// A directory fsync makes durable every directory change made before its own newest one, as
// a journaling filesystem's ordered log does; later changes elsewhere stay unsynced. etcd
// needs this: it fsyncs member/ after renaming wal.tmp to wal, and never fsyncs the data dir
// that member/ was created in, nor wal/ after its first segment was created.
func TestDirectoryFsyncMakesEarlierChangesDurableInOrder(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	dir := filepath.Join(mnt, "member")
	if err := os.Mkdir(dir, 0o700); err != nil { // a change to the root, never fsynced
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "wal.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeSynced(t, filepath.Join(dir, "wal.tmp", "0.wal"), "segment")
	if err := os.Rename(filepath.Join(dir, "wal.tmp"), filepath.Join(dir, "wal")); err != nil {
		t.Fatal(err)
	}
	fsync(t, dir)
	writeSynced(t, filepath.Join(mnt, "later"), "after the fsync")
	cutAndRemount(t, f, backing, mnt, CutOptions{})
	wantContent(t, filepath.Join(dir, "wal", "0.wal"), "segment")
	wantContent(t, filepath.Join(mnt, "later"), "<missing>")
}
