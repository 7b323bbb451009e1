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
}

// PIDFile and LogFile are where a member's process id and log go.
func PIDFile(dataDir string) string { return strings.TrimRight(dataDir, "/") + ".pid" }
func LogFile(dataDir string) string { return strings.TrimRight(dataDir, "/") + ".log" }

// Start launches the member in its own session.
func (r Runtime) Start(ctx context.Context, m runtime.MemberSpec) error {
	if len(r.Command) == 0 {
		return errors.New("local runtime: no etcd command")
	}
	if pid, _, ok := FindProcess(m.DataDir); ok {
		return fmt.Errorf("member %s already runs on %s (pid %d)", m.Name, m.DataDir, pid)
	}
	log, err := os.OpenFile(LogFile(m.DataDir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open member log: %w", err)
	}
	defer log.Close()
	argv := append(append([]string{}, r.Command...), m.Flags()...)
	p, err := os.StartProcess(argv[0], argv, &os.ProcAttr{Files: []*os.File{nil, log, log}, Sys: &syscall.SysProcAttr{Setsid: true}})
	if err != nil {
		return fmt.Errorf("start member %s: %w", m.Name, err)
	}
	if err := os.WriteFile(PIDFile(m.DataDir), []byte(strconv.Itoa(p.Pid)), 0o644); err != nil {
		p.Kill()
		return err
	}
	return p.Release()
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
	return VerifyStopped(m.DataDir)
}

// ErrStillRunning means a process holds the data dir after a stop: a supervisor restarted the
// member, or it runs where no signal of ours reaches.
var ErrStillRunning = errors.New("the member still runs on its data dir")

// VerifyStopped checks by the data dir's locks that no process runs on it.
func VerifyStopped(dataDir string) error {
	if !datadir.RunningOn(dataDir) {
		return nil
	}
	if pids := Holders(dataDir); len(pids) > 0 {
		p := Describe(pids[0])
		return fmt.Errorf("%w: pid %d (%s) holds %s; to stop it for good: %s", ErrStillRunning, p.PID, p.Command, dataDir, p.StopHint(dataDir))
	}
	return fmt.Errorf("%w: its WAL or db in %s is locked, by no process of this host (another host or container on shared storage?): stop that member first", ErrStillRunning, dataDir)
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
