package etcdtest

import (
	"os"

	"golang.org/x/sys/unix"
)

const (
	// runBaseEnv names the folder the run root goes under, overriding the choice below
	// (ETCDTEST_TMPDIR=/tmp puts the tests' members on the disk again).
	runBaseEnv = "ETCDTEST_TMPDIR"
	// memoryBase is where the run root goes by default when it is a tmpfs with room.
	memoryBase = "/dev/shm"
	// memoryBaseMinFree is the room a run needs there: its data dirs, logs and backups peaked
	// at 3.7 GB in a full run, twice that leaves margin for two runs at once.
	memoryBaseMinFree = 8 << 30
)

// runBase is the folder the run root is made in. The tests' members go on memory when the
// machine has a tmpfs with room: an fsync there costs nothing, so a test's members are not
// slowed by every other test's fsyncs on the one disk (on these 2-core machines a full run's
// etcd fsyncs made the drills' workload 3 times slower and took a quarter of its CPU). No test
// relies on the disk's own durability: the power-cut tests cut the power in their crash
// filesystem (internal/crashfs), which drops what was not fsynced itself, and the ENOSPC tests
// mount small tmpfs of their own. Benchmarks (bench/) run on the disk, as users' members do.
func runBase() string {
	if dir := os.Getenv(runBaseEnv); dir != "" {
		return dir
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(memoryBase, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		return os.TempDir()
	}
	if int64(fs.Bavail)*fs.Bsize < memoryBaseMinFree || unix.Access(memoryBase, unix.W_OK|unix.X_OK) != nil {
		return os.TempDir()
	}
	return memoryBase
}
