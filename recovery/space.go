package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// spareBytes is kept free beyond the backups themselves (manifests, journal, fs metadata).
const spareBytes = 16 << 20

// etcdGrowth is what etcd itself may write on a data dir's filesystem during a recovery: a new
// WAL segment, preallocated at 64 MiB, and the next one.
const etcdGrowth = 2 * 64 << 20

// checkBackupSpace refuses a plan whose backup folder's filesystem cannot hold a copy of
// every member's data dir (and, when a data dir shares it, what etcd writes there meanwhile):
// a backup that fills the disk half-way protects nothing.
func checkBackupSpace(backupDir string, members []PlanMember) error {
	free, where, err := freeBytes(backupDir)
	if err != nil {
		return fmt.Errorf("measure the free space for %s: %w", backupDir, err)
	}
	need := int64(spareBytes)
	for _, m := range members {
		n, err := backup.TreeSize(m.DataDir, datadir.Ignorable)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("measure %s's data dir %s: %w", m.Name, m.DataDir, err)
		}
		need += n
		if sameFilesystem(m.DataDir, where) {
			need += etcdGrowth
		}
	}
	if free < need {
		return fmt.Errorf("the backups need %d MiB and %s has %d MiB free: choose another --backup-dir, or free space; nothing was changed", need>>20, where, free>>20)
	}
	return nil
}

func sameFilesystem(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev
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
