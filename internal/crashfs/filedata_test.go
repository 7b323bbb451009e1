package crashfs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Data written and fsynced survives a cut; data written after the fsync does not: the file
// goes back to its synced content and size.
func TestCutKeepsFsyncedDataAndDropsTheRest(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	path := filepath.Join(mnt, "data")
	synced := strings.Repeat("s", 3*pageSize+100) // a few pages and a partial one
	writeSynced(t, path, synced)
	fsync(t, mnt) // the file's name, too

	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteAt([]byte("overwritten"), pageSize-5); err != nil { // across a page boundary
		t.Fatal(err)
	}
	if _, err := file.WriteAt([]byte("appended"), int64(len(synced))+pageSize); err != nil {
		t.Fatal(err)
	}
	file.Close()
	if got := f.Unsynced(); got.Files != 1 || got.Bytes != int64(len("overwritten")+len("appended")) || got.Entries != 0 {
		t.Errorf("Unsynced() = %+v, want 1 file with 19 bytes, no entries", got)
	}

	report := cutAndRemount(t, f, backing, mnt, CutOptions{})
	wantContent(t, path, synced)
	if len(report.Files) != 1 || report.Files[0].Path != "data" || report.BytesDropped != 19 {
		t.Errorf("report: files %v, %d bytes dropped; want data, 19 bytes", report.Files, report.BytesDropped)
	}
}

// An unsynced truncate, shrinking or growing, is undone by a cut.
func TestCutUndoesAnUnsyncedTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
	}{
		{"shrink into the first page", 10},
		{"shrink to nothing", 0},
		{"grow", 10 * pageSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, mnt, backing := mountForTest(t)
			path := filepath.Join(mnt, "data")
			synced := strings.Repeat("0123456789", 1000)
			writeSynced(t, path, synced)
			fsync(t, mnt)
			if err := os.Truncate(path, tc.size); err != nil {
				t.Fatal(err)
			}
			cutAndRemount(t, f, backing, mnt, CutOptions{})
			wantContent(t, path, synced)
		})
	}
}

// Truncating and rewriting a file (O_TRUNC) without fsync leaves the old content after a cut.
func TestCutUndoesAnUnsyncedRewrite(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	path := filepath.Join(mnt, "config")
	writeSynced(t, path, "old config, long enough to be cut short")
	fsync(t, mnt)
	writeFile(t, path, "new")
	cutAndRemount(t, f, backing, mnt, CutOptions{})
	wantContent(t, path, "old config, long enough to be cut short")
}

// fdatasync counts like fsync, through any handle of the file, and a rename does not lose
// track of the file: its data is tracked by inode, not by name.
func TestFdatasyncThroughAnotherHandleAfterARenameMakesDataDurable(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	writeSynced(t, filepath.Join(mnt, "a"), "synced")
	fsync(t, mnt)
	writer, err := os.OpenFile(filepath.Join(mnt, "a"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if _, err := writer.WriteString(" and appended"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "b")); err != nil {
		t.Fatal(err)
	}
	fsync(t, mnt) // the rename is durable
	reader, err := os.Open(filepath.Join(mnt, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := syscall.Fdatasync(int(reader.Fd())); err != nil {
		t.Fatal(err)
	}
	writer.Close()
	reader.Close()
	cutAndRemount(t, f, backing, mnt, CutOptions{})
	wantContent(t, filepath.Join(mnt, "b"), "synced and appended")
}

// A file opened with O_DSYNC is synced by each write.
func TestODsyncWritesAreDurable(t *testing.T) {
	f, mnt, backing := mountForTest(t)
	path := filepath.Join(mnt, "journal")
	writeSynced(t, path, "")
	fsync(t, mnt)
	file, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DSYNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteString("durable"); err != nil {
		t.Fatal(err)
	}
	file.Close()
	if got := f.Unsynced(); got.Files != 0 {
		t.Errorf("Unsynced() after an O_DSYNC write = %+v, want no files", got)
	}
	cutAndRemount(t, f, backing, mnt, CutOptions{})
	wantContent(t, path, "durable")
}
