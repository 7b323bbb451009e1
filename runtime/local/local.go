// Package local runs members as local processes, detached from etcdmedic so they outlive it,
// with their pid in <data-dir>.pid and their log in <data-dir>.log.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/runtime"
)

// Runtime starts etcd with Command (for etcdmedic itself: {"/path/etcdmedic", "etcd"}).
type Runtime struct {
	Command []string
	Grace   time.Duration
	// Env are the ETCD_* variables the operator passes on purpose, as NAME=value
	// (runtime.Passed, or a plan's): the member gets them and runtime.Environ's base, nothing
	// else of etcdmedic's environment.
	Env []string
}

// PIDFile and LogFile are where a member's process id and log go.
func PIDFile(dataDir string) string { return strings.TrimRight(dataDir, "/") + ".pid" }
func LogFile(dataDir string) string { return strings.TrimRight(dataDir, "/") + ".log" }

// Start launches the member in its own session.
func (r Runtime) Start(ctx context.Context, m runtime.MemberSpec) error {
	if len(r.Command) == 0 {
		return errors.New("local runtime: no etcd command")
	}
	if err := runtime.Conflicts(r.Env, append(r.Command[1:len(r.Command):len(r.Command)], m.Flags()...)); err != nil {
		return fmt.Errorf("start member %s: %w", m.Name, err)
	}
	if pid, _, ok := FindProcess(m.DataDir); ok {
		return fmt.Errorf("member %s already runs on %s (pid %d)", m.Name, m.DataDir, pid)
	}
	// The log holds etcd's whole command line: its owner's only, even when an older etcdmedic
	// made it readable to all.
	log, err := os.OpenFile(LogFile(m.DataDir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open member log: %w", err)
	}
	defer log.Close()
	if err := log.Chmod(0o600); err != nil {
		return fmt.Errorf("open member log: %w", err)
	}
	argv := append(append([]string{}, r.Command...), m.Flags()...)
	p, err := os.StartProcess(argv[0], argv, &os.ProcAttr{Env: runtime.EnvironOf(r.Env), Files: []*os.File{nil, log, log}, Sys: &syscall.SysProcAttr{Setsid: true}})
	if err != nil {
		return fmt.Errorf("start member %s: %w", m.Name, err)
	}
	if err := writePIDFile(PIDFile(m.DataDir), p.Pid); err != nil {
		p.Kill()
		return err
	}
	return p.Release()
}

// writePIDFile records pid in path, readable and writable by its owner only.
func writePIDFile(path string, pid int) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(pid))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write pid file %s: %w", path, err)
	}
	return nil
}

// Stop sends SIGTERM to every process on the member's data dir, waits up to Grace, then
// SIGKILL. The stop is proven by the data dir's own locks (the WAL's and the db's), not by the
// process table: a member that still holds them is reported, with who holds them now.
func (r Runtime) Stop(ctx context.Context, m runtime.MemberSpec) error {
	pids := Holders(m.DataDir)
	if pid, _, ok := FindProcess(m.DataDir); ok && !slices.Contains(pids, pid) {
		pids = append(pids, pid)
	}
	grace := r.Grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for anyAlive(pids) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, pid := range pids {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for i := 0; i < 100 && anyAlive(pids); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	err := VerifyStopped(m.DataDir)
	var again *StillRunning
	if errors.As(err, &again) && again.Holder.PID != 0 && !slices.Contains(pids, again.Holder.PID) {
		again.Restarted = true // not a process we signalled: something started it again
	}
	return err
}

// StillRunning means a process holds the data dir after a stop: a supervisor started the
// member again, or it runs where no signal of ours reaches.
type StillRunning struct {
	DataDir string
	// Holder is the process holding the data dir (PID 0: none on this host).
	Holder Process
	// Restarted is set when the holder is not the process that was stopped.
	Restarted bool
}

// ErrStillRunning matches every StillRunning.
var ErrStillRunning = errors.New("the member still runs on its data dir")

func (e *StillRunning) Is(target error) bool { return target == ErrStillRunning }

func (e *StillRunning) Error() string {
	if e.Holder.PID == 0 {
		return fmt.Sprintf("%v: its WAL or db in %s is locked, by no process of this host (another host, or a container on shared storage?): stop that member first", ErrStillRunning, e.DataDir)
	}
	what := "holds"
	if e.Restarted {
		what = "was started again and holds"
	}
	return fmt.Sprintf("%v: pid %d (%s) %s %s; to stop it for good: %s", ErrStillRunning, e.Holder.PID, e.Holder.Command, what, e.DataDir, e.Holder.StopHint(e.DataDir, e.Restarted))
}

// VerifyStopped checks by the data dir's locks that no process runs on it, nor an etcd whose
// command line or environment names it: a member just started has not locked its files yet
// (a recovery rerun once took such a learner for stopped). A process that holds the locks is
// looked for during a second: one just started may not have opened them all.
func VerifyStopped(dataDir string) error {
	for i := 0; ; i++ {
		if !datadir.RunningOn(dataDir) {
			if pid, _, ok := FindProcess(dataDir); ok {
				return &StillRunning{DataDir: dataDir, Holder: Describe(pid)}
			}
			return nil
		}
		if pids := Holders(dataDir); len(pids) > 0 {
			return &StillRunning{DataDir: dataDir, Holder: Describe(pids[0])}
		}
		if i == 10 {
			return &StillRunning{DataDir: dataDir}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func anyAlive(pids []int) bool {
	return slices.ContainsFunc(pids, alive)
}

func readPID(dataDir string) (int, error) {
	b, err := os.ReadFile(PIDFile(dataDir))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// alive is false for a process that exited, zombies included.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] != 'Z'
	}
	return true
}
