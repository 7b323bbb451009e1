package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/etcdmedic/etcdmedic/deployment"
)

// FindProcess finds a running etcd on dataDir, however it was started (by this runtime, a
// sandbox, a test harness, a unit file or by hand), and returns its pid and arguments: the
// process whose --data-dir (or ETCD_DATA_DIR) is dataDir, behind symlinks too, else a process
// that holds a file of the data dir open.
func FindProcess(dataDir string) (int, []string, bool) {
	want := samePath(dataDir)
	if pid, err := readPID(dataDir); err == nil && alive(pid) {
		if args := cmdline(pid); want(dataDirOf(pid, args)) {
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
		if len(args) > 0 && want(dataDirOf(pid, args)) && alive(pid) {
			return pid, args, true
		}
	}
	if pids := Holders(dataDir); len(pids) > 0 {
		return pids[0], cmdline(pids[0]), true
	}
	return 0, nil, false
}

// SamePath reports whether a and b name one folder, as written or once symlinks are resolved
// (a manifest or a unit may name the data dir through a link, a plan by its real path).
func SamePath(a, b string) bool { return samePath(a)(b) }

// samePath matches paths naming dataDir, as written or once symlinks are resolved. Relative
// paths are under etcdmedic's working directory (a process's data dir comes absolute, resolved
// under its own working directory).
func samePath(dataDir string) func(string) bool {
	clean := absPath(dataDir)
	real, _ := filepath.EvalSymlinks(clean)
	return func(p string) bool {
		if p == "" {
			return false
		}
		if p = absPath(p); p == clean {
			return true
		}
		r, err := filepath.EvalSymlinks(p)
		return err == nil && real != "" && r == real
	}
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// dataDirOf returns the data dir of an etcd process as etcd resolves it (deployment.FromCommand
// over its command line, environment and working directory): a config file wins over flags and
// ETCD_* variables, -flag counts as --flag, a relative path is under its working directory. ""
// if it cannot be told, or if the process is not an etcd (an `etcdmedic guard --data-dir X` is
// not the member).
func dataDirOf(pid int, args []string) string {
	if !looksLikeEtcd(args) {
		return ""
	}
	_, env := deployment.ProcessCommand(pid)
	s, err := deployment.FromCommand(args, env)
	if err != nil {
		// A program FromCommand does not know by its name (openshift-etcd, pd-server-v7.5), or
		// an etcd older than v3.4 that ran with a flag and its variable both set: its data dir
		// flag, else ETCD_DATA_DIR, as written ("" when neither: Holders still sees it).
		return dataDirWritten(args, env)
	}
	return s.DataDir
}

// dataDirWritten is a process's --data-dir (or -data-dir) flag, else its ETCD_DATA_DIR,
// under its working directory when relative.
func dataDirWritten(args []string, env deployment.Environment) string {
	dir := env.Vars["ETCD_DATA_DIR"]
	for i, a := range args[1:] {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "data-dir" {
			continue
		}
		if !hasValue && i+2 < len(args) {
			value = args[i+2]
		}
		dir = value
	}
	if dir == "" {
		return ""
	}
	if !filepath.IsAbs(dir) && env.Dir != "" {
		dir = filepath.Join(env.Dir, dir)
	}
	return dir
}

// looksLikeEtcd: an etcd server (etcd, PD's pd-server, or etcdmedic's own `etcdmedic etcd`),
// not a client or a tool.
func looksLikeEtcd(args []string) bool {
	if len(args) == 0 {
		return false
	}
	base := filepath.Base(args[0])
	switch {
	case strings.Contains(base, "etcdctl"), strings.Contains(base, "etcdutl"):
		return false
	case strings.HasPrefix(base, "etcdmedic"):
		return len(args) > 1 && args[1] == "etcd"
	}
	return strings.Contains(base, "etcd") || strings.Contains(base, "pd-server")
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
