package deployment

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
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
	unit, pod := Supervisor(pid)
	switch {
	case unit != "":
		s.Runs.Kind, s.Runs.Unit = Systemd, unit
		s.Runs.Stop, s.Runs.Start = "systemctl stop "+unit, "systemctl start "+unit
	case pod:
		s.Runs.Stop = "move its static pod manifest out of kubelet's folder (/etc/kubernetes/manifests), or delete its pod"
	default:
		s.Runs.Stop = "kill -TERM " + strconv.Itoa(pid)
		s.Runs.Start = strings.Join(argv, " ")
	}
	return s, nil
}

// Supervisor reads from pid's cgroup what runs it: the systemd unit its cgroup names
// (etcd.service), or pod set when its cgroup is a Kubernetes pod's (kubelet runs it).
func Supervisor(pid int) (unit string, pod bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", false
	}
	cg := string(b)
	if strings.Contains(cg, "kubepods") {
		return "", true
	}
	if m := unitPattern.FindStringSubmatch(cg); m != nil {
		return m[1], false
	}
	return "", false
}

// unitPattern finds a system service in a cgroup path (user@1000.service is a login session,
// not etcd's unit).
var unitPattern = regexp.MustCompile(`system\.slice/(?:[^/\n]*/)*?([A-Za-z0-9@_.\\-]+\.service)(?:/|\n|$)`)

// ProcessCommand reads what /proc says of pid's command line, environment and working
// directory. The environment is nil when it cannot be read (another user's process); the
// working directory is the /proc link itself then, which resolves as the process would.
func ProcessCommand(pid int) (argv []string, env Environment) {
	dir := "/proc/" + strconv.Itoa(pid)
	raw, _ := os.ReadFile(dir + "/cmdline")
	cwd, err := os.Readlink(dir + "/cwd")
	if err != nil {
		cwd = dir + "/cwd"
	}
	environ, _ := os.ReadFile(dir + "/environ")
	return nulSeparated(raw), EnvironmentOf(nulSeparated(environ), cwd)
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
