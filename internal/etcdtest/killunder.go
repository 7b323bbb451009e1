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
	root = filepath.Clean(root) + "/"
	for range 50 {
		found := false
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
			if !strings.Contains(string(b), root) && !strings.HasPrefix(cwd+"/", root) {
				continue
			}
			found = true
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if !found {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
