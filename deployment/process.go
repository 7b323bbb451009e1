package deployment

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// FromProcess resolves the member a running process is: its command line, its ETCD_*
// variables (/proc/PID/environ, readable by its owner and root) and its working directory.
// Its systemd unit or Kubernetes pod, when its cgroup names one, says how it is stopped.
func FromProcess(pid int) (Spec, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	raw, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return Spec{}, fmt.Errorf("process %d: %w", pid, err)
	}
	argv := nulSeparated(raw)
	if len(argv) == 0 {
		return Spec{}, fmt.Errorf("process %d has no command line (a kernel thread, or it has exited)", pid)
	}
	environ, err := os.ReadFile(dir + "/environ")
	if err != nil {
		return Spec{}, fmt.Errorf("process %d: its environment is not readable (%w): run as its owner or root", pid, err)
	}
	cwd, err := os.Readlink(dir + "/cwd")
	if err != nil {
		return Spec{}, fmt.Errorf("process %d: %w", pid, err)
	}
	env := EnvironmentOf(nulSeparated(environ), cwd)
	s, err := FromCommand(argv, env)
	if err != nil {
		return Spec{}, fmt.Errorf("process %d: %w", pid, err)
	}
	s.Runs.PID = pid
	p := local.Describe(pid)
	switch {
	case p.Unit != "":
		s.Runs.Kind, s.Runs.Unit = Systemd, p.Unit
		s.Runs.Stop, s.Runs.Start = "systemctl stop "+p.Unit, "systemctl start "+p.Unit
	case p.Pod:
		s.Runs.Stop = "move its static pod manifest out of kubelet's folder (/etc/kubernetes/manifests), or delete its pod"
	default:
		s.Runs.Stop = "kill -TERM " + strconv.Itoa(pid)
		s.Runs.Start = strings.Join(argv, " ")
	}
	return s, nil
}

func nulSeparated(b []byte) []string {
	var out []string
	for _, part := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		if len(part) > 0 {
			out = append(out, string(part))
		}
	}
	return out
}
