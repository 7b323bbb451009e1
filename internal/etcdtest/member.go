package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// stopGrace is how long Stop waits after SIGTERM; a leader hands over leadership first.
	stopGrace = 10 * time.Second
	// reapTimeout bounds the wait for a SIGKILLed process to be reaped.
	reapTimeout = 10 * time.Second
	// defaultReadyTimeout bounds WaitReady when its context has no deadline, and cluster start.
	defaultReadyTimeout = 30 * time.Second
	// nudgeAfter is how long a member may be not ready before WaitReady writes to the cluster.
	nudgeAfter = 2 * time.Second
)

// Member is one etcd process of a Cluster: its identity, its files, and its process.
type Member struct {
	// Name is the etcd --name: m1, m2, ... or the name given to AddMember.
	Name string
	// ID is the member ID in the cluster's member list.
	ID uint64
	// DataDir is the member's --data-dir, <cluster dir>/<name>.etcd.
	DataDir string
	// LogPath is where the process's stdout and stderr (etcd's zap log) go, appended across
	// restarts; the harness marks each start and exit with an "etcdtest:" line.
	LogPath string
	// ClientURL and PeerURL are http://127.0.0.1:<port>, https with ClusterSpec.TLS. PeerURL is
	// the advertised one, in the member list: with ClusterSpec.PeerProxies, the proxy's.
	ClientURL string
	PeerURL   string
	// Version is the harness version (V3_5_19, Linked, ...) the member runs, or ran last.
	// Only RestartWith changes it.
	Version string

	cluster    *Cluster
	baseFlags  []string // identity, URLs and bootstrap flags, fixed at creation
	extraFlags []string // this member's own extra flags; RestartWith replaces them
	// learner is set while the harness added the member as a learner and has not promoted it:
	// learners refuse almost every RPC, so cluster clients leave them out.
	learner atomic.Bool
	// listenPeerURL is the member's --listen-peer-urls: PeerURL, or the address behind its proxy.
	listenPeerURL string
	proxy         *peerProxy  // nil without ClusterSpec.PeerProxies
	isolated      atomic.Bool // Isolate cut the member off its peers

	mu   sync.Mutex
	proc *process
}

// process is one run of the member's etcd.
type process struct {
	cmd   *exec.Cmd
	done  chan struct{} // closed once the process has been reaped
	state *os.ProcessState
}

// Flags returns the etcd flags the member starts with: its own, then the cluster's extra
// flags, then its own extra flags (for a repeated flag etcd keeps the last).
func (m *Member) Flags() []string {
	flags := append([]string(nil), m.baseFlags...)
	flags = append(flags, m.cluster.spec.ExtraFlags...)
	return append(flags, m.extraFlags...)
}

// Start starts the member's etcd with its flags. It does not wait for readiness (a member
// restarted without quorum, or on a removed member's data, never becomes ready): call
// WaitReady. On an existing data dir etcd ignores the --initial-cluster* flags.
func (m *Member) Start() error {
	if m.cluster.isClosed() {
		return fmt.Errorf("start member %s: the cluster was already cleaned up", m.Name)
	}
	if m.IsRunning() {
		return fmt.Errorf("start member %s: already running", m.Name)
	}
	bin, err := resolveBinary(m.Version)
	if err != nil {
		return fmt.Errorf("start member %s: %w", m.Name, err)
	}
	logFile, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start member %s: open log: %w", m.Name, err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := bin.Command(m.Flags()...)
	cmd.Dir = filepath.Dir(m.DataDir)
	cmd.Env = etcdFreeEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, so a kill reaches everything it started; SIGKILL if the test process
	// dies first, so no etcd outlives a crashed or timed-out test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logFile, "etcdtest: %s start %s (%s): %s %s\n",
		time.Now().Format(time.RFC3339Nano), m.Name, m.Version, bin.Path, strings.Join(cmd.Args[1:], " "))

	m.mu.Lock()
	defer m.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start member %s (%s): %w", m.Name, bin.Path, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	m.proc = p
	go func() {
		err := cmd.Wait()
		p.state = cmd.ProcessState
		if f, ferr := os.OpenFile(m.LogPath, os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
			fmt.Fprintf(f, "etcdtest: %s %s exited: %v\n", time.Now().Format(time.RFC3339Nano), m.Name, exitText(p.state, err))
			f.Close()
		}
		close(p.done)
	}()
	return nil
}

// etcdFreeEnv is the test's environment without ETCD_* variables, which etcd reads as flags.
func etcdFreeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}

func exitText(state *os.ProcessState, err error) string {
	if state != nil {
		return state.String()
	}
	return fmt.Sprint(err)
}

// Stop stops the member gracefully (SIGTERM), and kills it if it has not exited after 10 s.
func (m *Member) Stop() error {
	return m.signalAndWait(syscall.SIGTERM, stopGrace)
}

// Kill kills the member's process group with SIGKILL, like a power cut to that process.
func (m *Member) Kill() error {
	return m.signalAndWait(syscall.SIGKILL, reapTimeout)
}

func (m *Member) signalAndWait(sig syscall.Signal, grace time.Duration) error {
	p := m.current()
	if p == nil || p.exited() {
		return nil
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(reapTimeout):
		return fmt.Errorf("member %s (pid %d) still not reaped %s after SIGKILL", m.Name, pid, reapTimeout)
	}
}

// RestartWith stops the member and starts it again on version ("" keeps the current one) with
// extraFlags replacing the member's own extra flags (the cluster's ExtraFlags stay). Like
// Start, it does not wait for readiness.
func (m *Member) RestartWith(version string, extraFlags []string) error {
	if err := m.Stop(); err != nil {
		return err
	}
	if version != "" {
		m.Version = version
	}
	m.extraFlags = append([]string(nil), extraFlags...)
	return m.Start()
}

// IsRunning reports whether the member's process is alive.
func (m *Member) IsRunning() bool {
	p := m.current()
	return p != nil && !p.exited()
}

// WaitExit waits until the member's process exits and returns how it exited; it fails if ctx
// ends first or the member was never started.
func (m *Member) WaitExit(ctx context.Context) (*os.ProcessState, error) {
	p := m.current()
	if p == nil {
		return nil, fmt.Errorf("member %s was never started", m.Name)
	}
	select {
	case <-p.done:
		return p.state, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("member %s still running: %w", m.Name, ctx.Err())
	}
}

// LogTail returns the last n lines of the member's log.
func (m *Member) LogTail(n int) string {
	return readLogTail(m.LogPath, n)
}

// Client returns a client connected to this member alone (with the cluster's client cert when
// it has TLS), closed when t ends. With clientv3.WithSerializable its reads show this member's
// own data.
func (m *Member) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := m.cluster.newClient([]string{m.ClientURL})
	if err != nil {
		t.Fatalf("member %s: %v", m.Name, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Status asks the member itself for its status (works on learners and without quorum).
func (m *Member) Status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cli, err := m.cluster.newClient([]string{m.ClientURL})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	st, err := cli.Status(ctx, m.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("status of member %s: %w", m.Name, err)
	}
	return st, nil
}

// WaitReady waits until the member serves requests: it answers Status with a known leader and
// no errors, and serves a read (linearizable for a voter). A new member on an idle cluster can
// stall until something is written, so after a few seconds it writes the key "etcdtest/nudge"
// through the other members. Without a deadline in ctx it gives up after 30 s; the error names
// the member and carries its log tail.
func (m *Member) WaitReady(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultReadyTimeout)
		defer cancel()
	}
	cli, err := m.cluster.newClient([]string{m.ClientURL})
	if err != nil {
		return err
	}
	defer cli.Close()
	started := time.Now()
	var lastNudge time.Time
	var lastErr error
	for {
		if !m.IsRunning() {
			return m.errorf("exited before it was ready (%s)", m.exitState())
		}
		if lastErr = probeReady(ctx, cli, m.ClientURL); lastErr == nil {
			return nil
		}
		if time.Since(started) > nudgeAfter && time.Since(lastNudge) > time.Second {
			m.cluster.nudge(ctx, m)
			lastNudge = time.Now()
		}
		select {
		case <-ctx.Done():
			return m.errorf("not ready after %s: %v", time.Since(started).Round(time.Millisecond), lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probeReady checks once, within a second, that the member at endpoint serves requests.
func probeReady(ctx context.Context, cli *clientv3.Client, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return err
	}
	if len(st.Errors) > 0 {
		return errors.New(strings.Join(st.Errors, "; "))
	}
	if st.Leader == 0 {
		return errors.New("no leader")
	}
	var opts []clientv3.OpOption
	if st.IsLearner { // learners serve only serializable reads
		opts = append(opts, clientv3.WithSerializable())
	}
	_, err = cli.Get(ctx, "etcdtest/ready", opts...)
	return err
}

// errorf formats an error that names the member and ends with its log tail.
func (m *Member) errorf(format string, args ...any) error {
	return fmt.Errorf("member %s (%s, %s) %s\nlast lines of %s:\n%s",
		m.Name, m.Version, m.ClientURL, fmt.Sprintf(format, args...), m.LogPath, indent(m.LogTail(30)))
}

func (m *Member) current() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

func (m *Member) exitState() string {
	p := m.current()
	if p == nil {
		return "never started"
	}
	if !p.exited() {
		return "running"
	}
	return exitText(p.state, nil)
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
