package sandbox

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// pinned is a process held by a pidfd: signals sent through it reach that process or none,
// never a newer process that got its pid.
type pinned struct {
	pid int
	fd  int // -1 on kernels without pidfd (before 5.3): the pid alone
}

func pin(pid int) (*pinned, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		return &pinned{pid: pid, fd: -1}, nil
	}
	if err != nil {
		return nil, err
	}
	return &pinned{pid: pid, fd: fd}, nil
}

func (p *pinned) signal(sig syscall.Signal) error {
	if p.fd < 0 {
		return syscall.Kill(p.pid, sig)
	}
	return unix.PidfdSendSignal(p.fd, sig, nil, 0)
}

// alive: the pinned process has not exited (a zombie has).
func (p *pinned) alive() bool {
	if err := p.signal(0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(p.pid)
}

func (p *pinned) release() {
	if p.fd >= 0 {
		unix.Close(p.fd)
	}
}

// alive reports whether pid is a live process (a zombie, exited but not reaped, is not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(pid)
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 { // the command name may hold spaces
		f := strings.Fields(s[i+1:])
		return len(f) > 0 && f[0] == "Z"
	}
	return false
}

// cmdline is pid's argv, as /proc shows it.
func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// flagValue is the value of flag in args (--flag value or --flag=value), "" when absent.
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
