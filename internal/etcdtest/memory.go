package etcdtest

import (
	"bufio"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const (
	// onDiskEnv, set to any value, keeps the run root on the disk (no tmpfs of its own).
	onDiskEnv = "ETCDTEST_ON_DISK"
	// memorySize bounds the run root's tmpfs: a full run's data dirs, logs and backups peaked
	// at 3.7 GB; tmpfs only takes the memory its files use.
	memorySize = "16g"
	// memoryMinAvailable is the memory the machine must have free for the run root to go on it.
	memoryMinAvailable = 8 << 30
)

// mountMemory mounts a tmpfs of its own on the run root dir, when the tests run as root on a
// machine with memory to spare, and reports whether it did. An fsync costs nothing there, so
// one test's members are not slowed by every other test's fsyncs on the one disk: on these
// 2-core machines the drills' workload made 3 times fewer operations a second on the disk,
// and the run used a quarter more CPU. No test relies on the disk's own durability: the
// power-cut tests cut the power in their crash filesystem (internal/crashfs), which drops
// what was not fsynced itself, and the ENOSPC tests mount small tmpfs of their own.
// Benchmarks (bench/) run on the disk, as users' members do. removeRunRoot unmounts it.
func mountMemory(dir string) bool {
	if os.Getenv(onDiskEnv) != "" || os.Geteuid() != 0 {
		return false
	}
	if memAvailable() < memoryMinAvailable {
		return false
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%s,mode=0711", memorySize)); err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest: the test run's root %s stays on the disk: tmpfs mount: %v\n", dir, err)
		return false
	}
	return true
}

// memAvailable is /proc/meminfo's MemAvailable in bytes, or 0.
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kB int64
		if n, _ := fmt.Sscanf(sc.Text(), "MemAvailable: %d kB", &kB); n == 1 {
			return kB << 10
		}
	}
	return 0
}
