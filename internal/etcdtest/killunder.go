package etcdtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KillUnder SIGKILLs every process whose command line names a path under root, or whose
// working dir is under it (the members a run started, whoever started them: a power cut, or
// the end of a run), and waits until they are gone (bounded: 5 s).
func KillUnder(root string) {
	for range 50 {
		pids := ProcessesUnder(root)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ProcessesUnder lists the processes (but this one) whose command line names a path under
// root, or whose working dir is under it.
func ProcessesUnder(root string) []int {
	root = filepath.Clean(root) + "/"
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		if strings.Contains(string(b), root) || strings.HasPrefix(cwd+"/", root) {
			pids = append(pids, pid)
		}
	}
	return pids
}
