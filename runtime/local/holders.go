package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/etcdmedic/etcdmedic/deployment"
)

// Holders returns the pids of the processes that have a file of the data dir open. A running
// etcd keeps its WAL segments and its db open (and locked) however it was configured: by
// flags, by ETCD_DATA_DIR, by a config file, behind a symlink. Our own process is left out.
func Holders(dataDir string) []int {
	prefixes := holderPrefixes(dataDir)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if holdsAny(pid, prefixes) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// holderPrefixes are the real folders whose open files mark a member's process: the data dir
// and, when they are links to other disks, its WAL and snap folders.
func holderPrefixes(dataDir string) []string {
	var out []string
	for _, p := range []string{dataDir, filepath.Join(dataDir, "member", "wal"), filepath.Join(dataDir, "member", "snap")} {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			out = append(out, filepath.Clean(real)+string(filepath.Separator))
		}
	}
	return out
}

// holdsAny reports whether pid has a file under one of the prefixes open for writing: etcd
// writes its WAL segments and its db; a backup tool, an inspect or a pager only reads them, and
// must never be taken for the member (and killed as it).
func holdsAny(pid int, prefixes []string) bool {
	if len(prefixes) == 0 {
		return false
	}
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err != nil {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(target, p) && openForWriting(pid, fd.Name()) {
				return true
			}
		}
	}
	return false
}

// openForWriting reads the descriptor's open flags from /proc/PID/fdinfo (octal; O_WRONLY 1,
// O_RDWR 2).
func openForWriting(pid int, fd string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + fd)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&3 != 0
		}
	}
	return false
}

// Process is a process as the operator sees it in ps.
type Process struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	// Parent is the process that started it: a supervisor restarts what it started.
	ParentPID     int    `json:"parentPID"`
	ParentCommand string `json:"parentCommand"`
	// Unit is the systemd unit its cgroup names (etcd.service), if any; Pod is set when its
	// cgroup is a Kubernetes pod's (kubelet runs it).
	Unit string `json:"unit,omitempty"`
	Pod  bool   `json:"pod,omitempty"`
}

// Describe reads what /proc says of pid.
func Describe(pid int) Process {
	p := Process{PID: pid, Command: strings.Join(cmdline(pid), " ")}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			if f := strings.Fields(s[i+1:]); len(f) > 1 {
				p.ParentPID, _ = strconv.Atoi(f[1])
			}
		}
	}
	if p.ParentPID > 0 {
		p.ParentCommand = strings.Join(cmdline(p.ParentPID), " ")
	}
	p.Unit, p.Pod = deployment.Supervisor(pid)
	return p
}

// knownSupervisors start again what they run.
var knownSupervisors = []string{"systemd", "kubelet", "containerd-shim", "conmon", "runsv", "s6-supervise", "supervisord", "dockerd", "crio"}

func (p Process) supervised() bool {
	parent := strings.Fields(p.ParentCommand)
	if len(parent) == 0 {
		return false
	}
	base := filepath.Base(parent[0])
	for _, s := range knownSupervisors {
		if strings.HasPrefix(base, s) {
			return true
		}
	}
	return false
}

// StopHint is the command that stops p for good: its supervisor's, when it has one. restarted
// says that p was started again after a stop, so its parent supervises it whatever its name.
func (p Process) StopHint(dataDir string, restarted bool) string {
	switch {
	case p.Unit != "":
		return "systemctl stop " + p.Unit
	case p.Pod:
		return "let etcdmedic move its static pod manifest out of kubelet's folder: give --kubeadm-manifest NAME=/etc/kubernetes/manifests/etcd.yaml"
	case p.ParentPID > 1 && (restarted || p.supervised()):
		return fmt.Sprintf("stop its supervisor first (pid %d: %s), then kill %d", p.ParentPID, p.ParentCommand, p.PID)
	}
	return fmt.Sprintf("kill %d (and make sure nothing starts etcd on %s again)", p.PID, dataDir)
}
