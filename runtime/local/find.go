package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FindProcess finds a running etcd whose --data-dir is dataDir, however it was started (by
// this runtime, a sandbox, a test harness or by hand), and returns its pid and arguments.
func FindProcess(dataDir string) (int, []string, bool) {
	want := filepath.Clean(dataDir)
	if pid, err := readPID(dataDir); err == nil && alive(pid) {
		if args := cmdline(pid); dataDirOf(args) == want {
			return pid, args, true
		}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		args := cmdline(pid)
		if dataDirOf(args) == want && alive(pid) {
			return pid, args, true
		}
	}
	return 0, nil, false
}

func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// dataDirOf returns the --data-dir of an etcd command line ("" if none).
func dataDirOf(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok {
			return filepath.Clean(v)
		}
		if a == "--data-dir" && i+1 < len(args) {
			return filepath.Clean(args[i+1])
		}
	}
	return ""
}

// HasFlag reports whether a command line carries flag (as --flag or --flag=value).
func HasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}
