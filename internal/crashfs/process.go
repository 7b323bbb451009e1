package crashfs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Disk is a crash filesystem that can lose power or be unmounted: an FS served by this
// process, or a Process serving one from a process of its own.
type Disk interface {
	Cut(CutOptions) (*CutReport, error)
	Unmount() error
}

var (
	_ Disk = (*FS)(nil)
	_ Disk = (*Process)(nil)
)

const (
	// readyTimeout bounds Start's wait for the server's mount.
	readyTimeout = 15 * time.Second
	// cutTimeout bounds a cut: the server's own waits (drainTimeout, serverExitTimeout) and
	// the revert of the backing dir.
	cutTimeout = 60 * time.Second
	// commandTimeout bounds the other commands.
	commandTimeout = 30 * time.Second
	// exitTimeout bounds the wait for the server to exit after its last reply, or after
	// SIGKILL.
	exitTimeout = 10 * time.Second
	// stderrTail is how much of the server's stderr errors quote.
	stderrTail = 8 << 10
)

// Process is a crash filesystem served by a child process, so that this process may mmap the
// files on it (bbolt does): a page fault on a FUSE mapping blocks its thread outside any Go
// safe point, and a garbage collection would then stop the goroutines that answer it.
type Process struct {
	mountpoint string
	cmd        *exec.Cmd
	control    *os.File      // the server's stdin
	replies    chan string   // the server's stdout, a line at a time; closed at EOF
	exited     chan struct{} // closed once waitErr is set
	waitErr    error
	stderr     *tail

	// mu serialises the commands; closed is set once the server is gone or going.
	mu     sync.Mutex
	closed bool
}

// Start starts command with backing and mountpoint appended as its last two arguments and env
// ("KEY=value") added to this process's environment; the command must call Serve with them,
// its stdin and its stdout. It returns once the mount serves. A mount that FUSE cannot serve
// there returns an error wrapping ErrUnavailable.
func Start(command []string, backing, mountpoint string, env ...string) (*Process, error) {
	if len(command) == 0 {
		return nil, errors.New("start a crash filesystem server: no command")
	}
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	if mountpoint, err = filepath.Abs(mountpoint); err != nil {
		return nil, err
	}
	controlR, controlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repliesR, repliesW, err := os.Pipe()
	if err != nil {
		controlR.Close()
		controlW.Close()
		return nil, err
	}
	args := append(append([]string{}, command[1:]...), backing, mountpoint)
	cmd := exec.Command(command[0], args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout = controlR, repliesW
	p := &Process{mountpoint: mountpoint, cmd: cmd, control: controlW, replies: make(chan string, 4), exited: make(chan struct{}), stderr: &tail{}}
	cmd.Stderr = p.stderr
	cmd.WaitDelay = exitTimeout
	// Its own process group: a Ctrl-C meant for this process must not kill the server while
	// the mount is in use; this process's exit closes the control pipe and unmounts instead.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	controlR.Close()
	repliesW.Close()
	if err != nil {
		controlW.Close()
		repliesR.Close()
		return nil, fmt.Errorf("start the crash filesystem server %s: %w", command[0], err)
	}
	go p.readReplies(repliesR)
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	r, err := p.await(readyTimeout)
	if err == nil && !r.Ready && r.Error == "" {
		err = fmt.Errorf("first reply %+v is not the ready line", r)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start a crash filesystem on %s: %w", mountpoint, err), p.stop())
	}
	if r.Error != "" {
		p.closed = true
		return nil, p.finish(r.err())
	}
	return p, nil
}

// Cut turns the power off, as FS.Cut does, in the server, which then exits. With opts.Rand
// the server tears with a PCG seeded from it. If the server fails to answer, it is killed and
// the mount detached; the report is nil then, and the backing dir may not be reverted.
func (p *Process) Cut(opts CutOptions) (*CutReport, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("cut %s: not mounted", p.mountpoint)
	}
	p.closed = true
	req := cutRequest{Tear: opts.Tear, TearPath: opts.TearPath, TearPages: opts.TearPages}
	for opts.Rand != nil && req.Seed == 0 {
		req.Seed = opts.Rand.Uint64()
	}
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	r, err := p.request(cmdCut+" "+string(line), cutTimeout)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("cut %s: %w", p.mountpoint, err), p.stop())
	}
	if r.Report == nil {
		return nil, errors.Join(fmt.Errorf("cut %s: no report (%v)", p.mountpoint, r.err()), p.finish(nil))
	}
	return r.Report, p.finish(r.err())
}

// Unmount unmounts cleanly, as FS.Unmount does, and the server exits. While a process still
// uses the mount it fails and the server keeps serving. After Cut or Unmount it does nothing.
func (p *Process) Unmount() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	r, err := p.request(cmdUnmount, commandTimeout)
	if err != nil {
		p.closed = true
		return errors.Join(fmt.Errorf("unmount %s: %w", p.mountpoint, err), p.stop())
	}
	if err := r.err(); err != nil {
		return err
	}
	p.closed = true
	return p.finish(nil)
}

// Unsynced reports what a cut would drop now.
func (p *Process) Unsynced() (Pending, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Pending{}, fmt.Errorf("unsynced %s: not mounted", p.mountpoint)
	}
	r, err := p.request(cmdUnsynced, commandTimeout)
	if err == nil {
		err = r.err()
	}
	if err == nil && r.Pending == nil {
		err = fmt.Errorf("reply %+v has no pending changes", r)
	}
	if err != nil {
		return Pending{}, fmt.Errorf("unsynced %s: %w", p.mountpoint, err)
	}
	return *r.Pending, nil
}

// request sends one command line and waits for its reply.
func (p *Process) request(line string, timeout time.Duration) (reply, error) {
	if _, err := io.WriteString(p.control, line+"\n"); err != nil {
		return reply{}, p.exitError(fmt.Errorf("send %q: %w", line, err))
	}
	return p.await(timeout)
}

// await returns the server's next reply.
func (p *Process) await(timeout time.Duration) (reply, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case line, ok := <-p.replies:
		if !ok {
			return reply{}, p.exitError(errors.New("the server closed its replies"))
		}
		var r reply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return reply{}, p.exitError(fmt.Errorf("reply %q: %w", line, err))
		}
		return r, nil
	case <-timer.C:
		return reply{}, p.exitError(fmt.Errorf("no reply in %s", timeout))
	}
}

// readReplies passes the server's reply lines on until EOF.
func (p *Process) readReplies(r *os.File) {
	defer r.Close()
	defer close(p.replies)
	lines := bufio.NewScanner(r)
	lines.Buffer(nil, 64<<20) // a cut report lists every file and directory change it undid
	for lines.Scan() {
		p.replies <- lines.Text()
	}
}

// finish waits for the server to exit after its last reply, which said replyErr; a server
// that does not exit is killed and its mount detached.
func (p *Process) finish(replyErr error) error {
	p.control.Close()
	select {
	case <-p.exited:
		if replyErr == nil && p.waitErr != nil {
			return p.exitError(errors.New("after its last reply"))
		}
		return replyErr
	case <-time.After(exitTimeout):
		return errors.Join(replyErr, fmt.Errorf("the crash filesystem server of %s still runs %s after its last reply", p.mountpoint, exitTimeout), p.stop())
	}
}

// stop kills the server and detaches its mount, if it is still there.
func (p *Process) stop() error {
	p.control.Close()
	var errs []error
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		errs = append(errs, fmt.Errorf("kill the crash filesystem server: %w", err))
	}
	select {
	case <-p.exited:
	case <-time.After(exitTimeout):
		errs = append(errs, fmt.Errorf("the crash filesystem server (pid %d) of %s still runs %s after SIGKILL", p.cmd.Process.Pid, p.mountpoint, exitTimeout))
		// Stuck in a request to its own mount, perhaps: only aborting the connection frees it.
		if err := abortConnection(p.mountpoint); err != nil {
			errs = append(errs, fmt.Errorf("abort the FUSE connection of %s: %w", p.mountpoint, err))
		}
	}
	if mounted(p.mountpoint) {
		if err := unix.Unmount(p.mountpoint, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("detach %s: %w", p.mountpoint, err))
		}
	}
	return errors.Join(errs...)
}

// exitError adds to err how the server ended, if it has, and the tail of its stderr.
func (p *Process) exitError(err error) error {
	select {
	case <-p.exited:
		err = fmt.Errorf("%w; the server exited: %v", err, p.waitErr)
	case <-time.After(time.Second): // a server that closed its replies is about to exit
	}
	if s := strings.TrimSpace(p.stderr.String()); s != "" {
		err = fmt.Errorf("%w; its stderr: %s", err, s)
	}
	return fmt.Errorf("crash filesystem server of %s: %w", p.mountpoint, err)
}

// err is the error a reply carries, nil for none; it wraps ErrUnavailable when the server's
// did.
func (r reply) err() error {
	if r.Error == "" {
		return nil
	}
	return &serverError{msg: r.Error, unavailable: r.Unavailable}
}

// serverError is an error the server reported.
type serverError struct {
	msg         string
	unavailable bool
}

func (e *serverError) Error() string { return e.msg }

// Is makes errors.Is(err, ErrUnavailable) hold across the process boundary.
func (e *serverError) Is(target error) bool { return e.unavailable && target == ErrUnavailable }

// mounted reports whether a crash filesystem is mounted at mountpoint, as this process's
// mount table says.
func mounted(mountpoint string) bool {
	_, ok := mountDevice(mountpoint)
	return ok
}

// mountDevice returns the device ("0:39") of the crash filesystem mounted at mountpoint.
func mountDevice(mountpoint string) (string, bool) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	for line := range strings.Lines(string(data)) {
		// id parent major:minor root mountpoint options... - fstype source superoptions
		fields := strings.Fields(line)
		sep := strings.Index(line, " - ")
		if len(fields) < 5 || sep < 0 {
			continue
		}
		fstype, _, _ := strings.Cut(line[sep+3:], " ")
		if unescapeMountinfo(fields[4]) == mountpoint && fstype == "fuse.crashfs" {
			return fields[2], true
		}
	}
	return "", false
}

// abortConnection aborts the FUSE connection of the crash filesystem at mountpoint: every
// request waiting on it fails, which frees a process stuck in one (even a SIGKILLed one).
func abortConnection(mountpoint string) error {
	dev, ok := mountDevice(mountpoint)
	if !ok {
		return nil
	}
	_, minor, _ := strings.Cut(dev, ":")
	return os.WriteFile(filepath.Join("/sys/fs/fuse/connections", minor, "abort"), []byte("1"), 0)
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			ok := true
			for _, d := range s[i+1 : i+4] {
				if d < '0' || d > '7' {
					ok = false
					break
				}
				c = c*8 + byte(d-'0')
			}
			if ok {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// tail keeps the last stderrTail bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
