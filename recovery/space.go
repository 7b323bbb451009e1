package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// spareBytes is kept free beyond the backups themselves (manifests, journal, fs metadata).
const spareBytes = 16 << 20

// checkBackupSpace refuses a plan whose backup folder's filesystem cannot hold a copy of
// every member's data dir: a backup that fills the disk half-way protects nothing.
func checkBackupSpace(backupDir string, members []PlanMember) error {
	var need int64
	for _, m := range members {
		n, err := treeBytes(m.DataDir, 0)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("measure %s's data dir %s: %w", m.Name, m.DataDir, err)
		}
		need += n
	}
	free, where, err := freeBytes(backupDir)
	if err != nil {
		return fmt.Errorf("measure the free space for %s: %w", backupDir, err)
	}
	if free < need+spareBytes {
		return fmt.Errorf("the backups need %d MiB and %s has %d MiB free: choose another --backup-dir, or free space; nothing was changed", (need+spareBytes)>>20, where, free>>20)
	}
	return nil
}

// treeBytes adds up the sizes of the regular files under dir, following symlinks (a WAL on
// its own disk is backed up too), at most 32 folders deep.
func treeBytes(dir string, depth int) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range ents {
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // a dangling link: the backup says so
		}
		if st.IsDir() && depth < 32 {
			n, err := treeBytes(filepath.Join(dir, e.Name()), depth+1)
			if err != nil {
				return 0, err
			}
			total += n
		} else if st.Mode().IsRegular() {
			total += st.Size()
		}
	}
	return total, nil
}

// freeBytes is the space available to us on the filesystem that holds (or will hold) dir.
func freeBytes(dir string) (int64, string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Statfs_t
		err := unix.Statfs(d, &st)
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize), d, nil
		}
		if !errors.Is(err, unix.ENOENT) || d == filepath.Dir(d) {
			return 0, d, err
		}
	}
}
