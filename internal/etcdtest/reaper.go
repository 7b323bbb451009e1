package etcdtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Every process a test run starts, however far down, carries the run's root dir: Main points
// TMPDIR at it, every child inherits it (etcdmedic passes TMPDIR on to each member it starts,
// detached or not), and data dirs, logs and working dirs are under it. A watchdog process
// outlives the test binary and, when it ends however it ends, kills every such process.

const (
	// reaperRootEnv makes the re-executed test binary the watchdog of the run root it names.
	reaperRootEnv = "ETCDTEST_REAPER_ROOT"
	// runRootPrefix starts every run root's name: etcdmedic-test-<owner pid>-<random>.
	runRootPrefix = "etcdmedic-test-"
	// ownerFile, in a run root, holds the owning test binary's pid and start time.
	ownerFile = "owner"
	// sweepGrace is how long the processes of a run that ended may take to end by themselves.
	sweepGrace = time.Second
	// sweepTimeout bounds the wait for killed processes to be gone.
	sweepTimeout = 10 * time.Second
	// watchdogExitTimeout bounds how long a test binary that ends waits for its watchdog.
	watchdogExitTimeout = sweepGrace + sweepTimeout + 10*time.Second
)

// runRoot is the folder of one test run and the watchdog that sweeps it.
type runRoot struct {
	dir       string
	parent    *os.File      // the pipe's write end: the watchdog reads EOF once it closes
	exited    chan struct{} // closed when the watchdog has exited
	oldTMPDIR string
}

// startRunRoot sweeps what earlier killed runs left, makes this run's root, starts its
// watchdog, and points TMPDIR at the root (so t.TempDir and every child process use it).
func startRunRoot() (*runRoot, error) {
	sweepAbandoned(os.TempDir())
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", runRootPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("create the test run's root dir: %w", err)
	}
	mountMemory(dir)
	rr, err := startWatchdog(dir)
	if err != nil {
		removeRunRoot(dir)
		return nil, err
	}
	os.Setenv("TMPDIR", dir)
	return rr, nil
}

// startWatchdog records this test binary as the owner of run root dir and starts its watchdog.
func startWatchdog(dir string) (*runRoot, error) {
	// Others may pass through (tests run etcdmedic as a second user under it), not list it.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("open the test run's root dir %s: %w", dir, err)
	}
	start, err := startTime(os.Getpid())
	if err != nil {
		return nil, err
	}
	owner := fmt.Sprintf("%d %d\n", os.Getpid(), start)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o644); err != nil {
		return nil, fmt.Errorf("record the test run's owner: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the test binary to run its watchdog: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog pipe: %w", err)
	}
	defer r.Close() // the watchdog keeps its own copy
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reaperRootEnv+"="+dir)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{r} // fd 3
	// Its own process group: a ^C or a group kill of the test process does not take it along.
	// No Pdeathsig: its whole job starts when the parent dies, and the pipe says so exactly
	// (Pdeathsig fires when the forking thread exits, which in Go can be long before).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the test run's watchdog: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	return &runRoot{dir: dir, parent: w, exited: exited, oldTMPDIR: os.Getenv("TMPDIR")}, nil
}

// end tells the watchdog the tests are over and waits (bounded) until it has killed what is
// left and removed the root.
func (rr *runRoot) end() {
	rr.parent.Close()
	select {
	case <-rr.exited:
	case <-time.After(watchdogExitTimeout):
		fmt.Fprintf(os.Stderr, "etcdtest: the watchdog of %s did not finish within %s\n", rr.dir, watchdogExitTimeout)
	}
	if rr.oldTMPDIR == "" {
		os.Unsetenv("TMPDIR")
	} else {
		os.Setenv("TMPDIR", rr.oldTMPDIR)
	}
}

// watch is the watchdog: it waits until the test binary exits (EOF on fd 3), then kills every
// process of the run and removes the run root.
func watch(root string) int {
	parent := os.Getppid()
	// Alone in its process group, but a closing terminal still sends SIGHUP; and go test may
	// have stopped reading the output it shares (SIGPIPE would end it before its work is done).
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	pipe := os.NewFile(3, "test binary")
	io.Copy(io.Discard, pipe) // returns at EOF: every copy of the write end is closed
	killed, err := sweep(func(pid int) bool { return pid != parent && inRunRoot(pid, root) }, sweepGrace)
	err = errors.Join(err, removeRunRoot(root))
	if len(killed) > 0 {
		fmt.Fprintf(os.Stderr, "etcdtest: killed %d processes still running when the test binary ended:\n%s",
			len(killed), strings.Join(killed, ""))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest: %v\n", err)
		return 1
	}
	return 0
}

// sweepAbandoned kills the processes of earlier runs whose test binary is gone and whose
// watchdog could not finish (killed too), and removes their roots from tmp.
func sweepAbandoned(tmp string) {
	gone := map[string]bool{} // run root → its test binary is gone
	abandoned := func(pid int) bool {
		for _, root := range runRootsOf(pid) {
			g, seen := gone[root]
			if !seen {
				g = ownerGone(root)
				gone[root] = g
			}
			if g {
				return true
			}
		}
		return false
	}
	killed, err := sweep(abandoned, 0)
	if len(killed) > 0 {
		fmt.Fprintf(os.Stderr, "etcdtest: killed %d processes left by earlier test runs that were killed:\n%s",
			len(killed), strings.Join(killed, ""))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest: %v\n", err)
	}
	roots, _ := filepath.Glob(filepath.Join(tmp, runRootPrefix+"*"))
	for _, root := range roots {
		if ownerGone(root) {
			if err := removeRunRoot(root); err != nil {
				fmt.Fprintf(os.Stderr, "etcdtest: %v\n", err)
			}
		}
	}
}

// sweep SIGKILLs every process that match selects once grace has passed (what ends by itself,
// as a crash filesystem server that unmounts when its parent dies, may), until none is left or
// sweepTimeout more has passed. It spares itself and other watchdogs (of runs inside this one),
// which end by themselves once their test binary has. It returns a line (pid and command line)
// per process it killed.
func sweep(match func(pid int) bool, grace time.Duration) ([]string, error) {
	var killed []string
	seen := map[int]bool{}
	start := time.Now()
	for deadline := start.Add(grace + sweepTimeout); ; {
		var left []int
		for _, pid := range processes() {
			if pid != os.Getpid() && match(pid) && environ(pid)[reaperRootEnv] == "" {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return killed, nil
		}
		if time.Now().After(deadline) {
			return killed, fmt.Errorf("processes still running %s after SIGKILL: %v", sweepTimeout, left)
		}
		for _, pid := range left {
			if time.Since(start) < grace {
				break
			}
			if !seen[pid] {
				seen[pid] = true
				killed = append(killed, fmt.Sprintf("  pid %d: %s\n", pid, commandLine(pid)))
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processes lists the pids in /proc.
func processes() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// inRunRoot reports whether process pid belongs to the run whose root is root: its TMPDIR is
// under root, or its command line names a path under it, or it works under it. A killed process
// matches no more (a zombie has no environment, command line or working dir left).
func inRunRoot(pid int, root string) bool {
	if tmp, ok := environ(pid)["TMPDIR"]; ok && isUnder(tmp, root) {
		return true
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && isUnder(cwd, root) {
		return true
	}
	for _, arg := range argv(pid) {
		if strings.Contains(arg, root+"/") || strings.HasSuffix(arg, root) {
			return true
		}
	}
	return false
}

// runRootsOf returns the run roots process pid names in its TMPDIR, working dir or arguments.
func runRootsOf(pid int) []string {
	var paths []string
	if tmp, ok := environ(pid)["TMPDIR"]; ok {
		paths = append(paths, tmp)
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil {
		paths = append(paths, cwd)
	}
	return rootsIn(append(paths, argv(pid)...))
}

// rootsIn returns the run roots named in paths (or in flags and lists holding paths).
func rootsIn(paths []string) []string {
	var roots []string
	for _, p := range paths {
		i := strings.Index(p, "/"+runRootPrefix)
		if i < 0 {
			continue
		}
		start := strings.LastIndexAny(p[:i], "=,: ") + 1 // --data-dir=/tmp/..., m1=/tmp/...
		end := len(p)
		if j := strings.IndexByte(p[i+1:], '/'); j >= 0 {
			end = i + 1 + j
		}
		if root := p[start:end]; filepath.IsAbs(root) && !slices.Contains(roots, root) {
			roots = append(roots, root)
		}
	}
	return roots
}

// ownerGone reports whether the test binary that made run root root is gone: no process runs
// with the pid in the root's name, or one started later than its owner file says (a pid can be
// reused). A name this harness did not make is nobody's to judge: not gone.
func ownerGone(root string) bool {
	rest := strings.TrimPrefix(filepath.Base(root), runRootPrefix)
	pidText, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil {
		return false
	}
	start, err := startTime(pid)
	if err != nil {
		return true
	}
	var ownerPid int
	var ownerStart uint64
	if b, err := os.ReadFile(filepath.Join(root, ownerFile)); err == nil {
		if _, err := fmt.Sscan(string(b), &ownerPid, &ownerStart); err == nil && ownerPid == pid {
			return ownerStart != start
		}
	}
	return false
}

// startTime is the start time (in clock ticks since boot) of process pid, which tells it apart
// from a later process with the same pid; a zombie counts as gone.
func startTime(pid int) (uint64, error) {
	fields, err := statFields(fmt.Sprintf("/proc/%d/stat", pid), 20)
	if err != nil {
		return 0, err
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, fmt.Errorf("pid %d has exited", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64) // field 22 of proc(5), counting from state (3)
}

// statFields reads a /proc stat file (a process's or a thread's) and returns its fields after
// the command name, from the state (field 3 of proc(5)) on: at least n of them.
func statFields(path string, n int) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // the command may hold spaces
	if len(fields) < n {
		return nil, fmt.Errorf("short %s: %q", path, s)
	}
	return fields, nil
}

// environ reads the environment process pid started with.
func environ(pid int) map[string]string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

func argv(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

func commandLine(pid int) string {
	line := strings.Join(argv(pid), " ")
	if len(line) > 300 {
		line = line[:300] + "..."
	}
	return line
}

func isUnder(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

// removeRunRoot detaches what is still mounted under root (a crash filesystem whose server was
// killed leaves a dead mount) and removes it.
func removeRunRoot(root string) error {
	mounts, _ := mountsUnder(root)
	for _, mp := range mounts {
		unix.Unmount(mp, unix.MNT_DETACH)
	}
	if err := os.RemoveAll(root); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the test run's root dir: %w", err)
	}
	return nil
}

// mountsUnder lists the mount points under root, deepest first.
func mountsUnder(root string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		if mp := unescapeOctal(fields[4]); isUnder(mp, root) {
			out = append(out, mp)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, nil
}

// unescapeOctal undoes mountinfo's \ooo escapes (of space, tab, newline and backslash).
func unescapeOctal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
