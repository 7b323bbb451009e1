package datadir

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// walLocked reports whether a process holds a lock on the WAL segment: a running etcd locks
// its WAL files with open-file-description locks (client/pkg/fileutil, lock_linux.go), or with
// flock where those are missing. Asking takes no lock that could stay behind.
func walLocked(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err == nil && lk.Type != unix.F_UNLCK {
		return true
	}
	// flock: a shared, non-blocking try, released at once.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return err == unix.EWOULDBLOCK
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// WALDirLocked reports whether a process holds the newest WAL segment in walDir (a member's
// --wal-dir apart from its data dir): a running etcd does.
func WALDirLocked(walDir string) bool {
	segs, err := listWALSegments(walDir)
	return err == nil && len(segs) > 0 && walLocked(filepath.Join(walDir, segs[len(segs)-1].Name))
}

// RunningOn reports whether a process holds the data dir's newest WAL segment or its db.
func RunningOn(dataDir string) bool {
	for _, memberDir := range []string{filepath.Join(dataDir, "member"), dataDir} {
		walDir := filepath.Join(memberDir, "wal")
		if segs, err := listWALSegments(walDir); err == nil && len(segs) > 0 && walLocked(filepath.Join(walDir, segs[len(segs)-1].Name)) {
			return true
		}
		if f, err := os.Open(filepath.Join(memberDir, "snap", "db")); err == nil {
			err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
			if err == nil {
				unix.Flock(int(f.Fd()), unix.LOCK_UN)
			}
			f.Close()
			if err != nil {
				return true
			}
		}
	}
	return false
}
