// Package sandbox runs a local etcd cluster on 127.0.0.1 for trying etcdmedic out: each member
// is its own detached process (the etcd linked into etcdmedic), so that one can be stopped,
// killed or wiped like a real node while the others keep running.
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdmedic/etcdmedic/internal/freeport"
	"github.com/etcdmedic/etcdmedic/runlock"
	etcdruntime "github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// StateFile is where a sandbox records its members, inside its directory.
const StateFile = "sandbox.json"

// Sandbox is a local cluster's description, saved in <Dir>/sandbox.json.
type Sandbox struct {
	Dir     string   `json:"dir"`
	Token   string   `json:"token"`
	Command []string `json:"command"` // how a member is started: binary and leading args
	Members []Member `json:"members"`
	// Kubernetes is set when the sandbox runs a kube-apiserver beside each member.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
}

// Member is one sandbox member.
type Member struct {
	Name      string `json:"name"`
	DataDir   string `json:"dataDir"`
	ClientURL string `json:"clientURL"`
	PeerURL   string `json:"peerURL"`
	LogFile   string `json:"logFile"`
	PID       int    `json:"pid"`
}

// Options for Up.
type Options struct {
	Dir     string
	Members int
	// Command runs etcd: for etcdmedic itself, {"/path/etcdmedic", "etcd"}.
	Command []string
	// ReadyTimeout bounds the wait for the cluster to serve a linearizable read.
	ReadyTimeout time.Duration
	// BeforeStart, when set, runs for each member before its first start: a drill mounts the
	// member's disk (its data dir) there.
	BeforeStart func(m Member) error
}

// Up starts a new sandbox cluster in opts.Dir, which must not hold one already.
func Up(ctx context.Context, opts Options) (*Sandbox, error) {
	if opts.Members < 1 || opts.Members > 9 {
		return nil, fmt.Errorf("a sandbox has 1 to 9 members, not %d", opts.Members)
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, StateFile)); err == nil {
		return nil, fmt.Errorf("%s already holds a sandbox (etcdmedic sandbox down --dir %s first)", dir, dir)
	}
	if err := makePrivateDir(dir); err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * opts.Members)
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{Dir: dir, Token: fmt.Sprintf("etcdmedic-sandbox-%d", time.Now().UnixNano()), Command: opts.Command}
	var initial []string
	for i := 0; i < opts.Members; i++ {
		name := fmt.Sprintf("m%d", i+1)
		m := Member{
			Name:      name,
			DataDir:   filepath.Join(dir, name+".etcd"),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			LogFile:   filepath.Join(dir, name+".log"),
		}
		sb.Members = append(sb.Members, m)
		initial = append(initial, name+"="+m.PeerURL)
	}
	for i := range sb.Members {
		if opts.BeforeStart != nil {
			if err := opts.BeforeStart(sb.Members[i]); err != nil {
				sb.Down(5 * time.Second)
				return nil, fmt.Errorf("prepare member %s: %w", sb.Members[i].Name, err)
			}
		}
		if err := sb.start(&sb.Members[i], strings.Join(initial, ","), "new"); err != nil {
			sb.Down(5 * time.Second)
			return nil, err
		}
		// Recorded at once: killed before the next start, this run leaves no member that
		// sandbox down does not know.
		if err := sb.save(); err != nil {
			sb.Down(5 * time.Second)
			return nil, err
		}
	}
	if err := sb.waitStarted(ctx, opts.ReadyTimeout); err != nil {
		// Interrupted or failed: no member is left running; their logs stay.
		if derr := sb.Down(5 * time.Second); derr != nil {
			return nil, fmt.Errorf("%w; stopping the members: %v", err, derr)
		}
		return nil, &UpFailedError{Dir: dir, Err: err}
	}
	return sb, nil
}

// UpFailedError is a sandbox up that failed once its members had started: they were stopped,
// and their logs and sandbox.json stay in Dir.
type UpFailedError struct {
	Dir string
	Err error
}

func (e *UpFailedError) Error() string {
	return fmt.Sprintf("%v; its members were stopped (logs in %s)", e.Err, e.Dir)
}

func (e *UpFailedError) Unwrap() error { return e.Err }

// Lock takes the run lock of the sandbox in dir (runlock: a flock beside the folder), so that
// two commands changing one sandbox (two `sandbox start m2` from a retry loop) never run at once.
// The second one is refused with who holds it. Release it when the command ends.
func Lock(dir, purpose string) (*runlock.Lock, error) {
	return runlock.Acquire(dir, "sandbox "+purpose)
}

// waitStarted waits until the members just started serve a linearizable read. A member that
// exits meanwhile (its port taken, a flag its etcd does not know) fails it at once, with its
// log's last lines. Exited means its process is gone, not Running's check of its command
// line: right after an exec, /proc shows an empty one for a moment (seen in a full run).
func (sb *Sandbox) waitStarted(ctx context.Context, timeout time.Duration) error {
	return sb.waitRead(ctx, timeout, func() error {
		for _, m := range sb.Members {
			if m.Exited() {
				return fmt.Errorf("member %s exited before the sandbox was ready; the last lines of %s:\n%s", m.Name, m.LogFile, lastLines(m.LogFile, 20))
			}
		}
		return nil
	})
}

// Load reads the sandbox in dir.
func Load(dir string) (*Sandbox, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no sandbox in %s (start one with: etcdmedic sandbox up --dir %s)", dir, dir)
		}
		return nil, err
	}
	var sb Sandbox
	if err := json.Unmarshal(b, &sb); err != nil {
		return nil, fmt.Errorf("%s is damaged: %w", filepath.Join(dir, StateFile), err)
	}
	return &sb, nil
}

func (sb *Sandbox) save() error {
	b, err := json.MarshalIndent(sb, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(sb.Dir, StateFile+".tmp")
	f, err := openPrivate(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return os.Rename(tmp, filepath.Join(sb.Dir, StateFile))
}

// makePrivateDir creates the sandbox dir 0700 whatever the umask: its members' logs hold their
// command lines and its data dirs every key. An existing folder is taken only when empty, so
// that neither its mode change nor `down --purge` reaches someone else's files.
func makePrivateDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create sandbox dir: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read sandbox dir: %w", err)
	case len(ents) > 0:
		return fmt.Errorf("%s is not empty: a sandbox needs a new or empty folder (down --purge deletes it whole)", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("make sandbox dir private: %w", err)
	}
	return nil
}

// openPrivate opens a sandbox file 0600 whatever the umask, and whatever mode an earlier file
// of that name had.
func openPrivate(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("make %s private: %w", path, err)
	}
	return f, nil
}

// Member returns the member called name.
func (sb *Sandbox) Member(name string) (*Member, error) {
	for i := range sb.Members {
		if sb.Members[i].Name == name {
			return &sb.Members[i], nil
		}
	}
	var names []string
	for _, m := range sb.Members {
		names = append(names, m.Name)
	}
	return nil, fmt.Errorf("no member %q in the sandbox (members: %s)", name, strings.Join(names, ", "))
}

// Endpoints lists every member's client URL.
func (sb *Sandbox) Endpoints() []string {
	var eps []string
	for _, m := range sb.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

func (sb *Sandbox) initialCluster() string {
	var parts []string
	for _, m := range sb.Members {
		parts = append(parts, m.Name+"="+m.PeerURL)
	}
	return strings.Join(parts, ",")
}

// start launches one member as a detached process (its own session: it outlives etcdmedic).
func (sb *Sandbox) start(m *Member, initialCluster, state string) error {
	return sb.startOn(sb.Command, m, initialCluster, state)
}

// startOn launches one member on command (binary and leading args).
func (sb *Sandbox) startOn(command []string, m *Member, initialCluster, state string) error {
	if len(command) == 0 {
		return errors.New("sandbox has no etcd command")
	}
	log, err := openPrivate(m.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("open member log: %w", err)
	}
	defer log.Close()
	args := append(append([]string{}, command[1:]...),
		"--name", m.Name,
		"--data-dir", m.DataDir,
		"--listen-client-urls", m.ClientURL,
		"--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL,
		"--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", initialCluster,
		"--initial-cluster-state", state,
		"--initial-cluster-token", sb.Token,
	)
	p, err := os.StartProcess(command[0], append([]string{command[0]}, args...), &os.ProcAttr{
		Dir:   sb.Dir,
		Env:   etcdruntime.Environ(nil), // nothing of etcdmedic's ETCDCTL_* or ETCD_* reaches a member
		Files: []*os.File{nil, log, log},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return fmt.Errorf("start member %s: %w", m.Name, err)
	}
	m.PID = p.Pid
	return p.Release()
}

// Running reports whether the member's etcd is alive: the process sandbox.json records, checked
// to be this member (a pid is reused, and sandbox.json is only a file).
func (m *Member) Running() bool {
	return m.PID > 0 && alive(m.PID) && m.isOwnProcess(m.PID)
}

// Exited reports whether the process last started for the member is gone (or a zombie). Unlike
// Running it does not read the command line, so it suits a process this sandbox just started:
// right after the exec, /proc shows the new program's command line only a moment later.
func (m *Member) Exited() bool {
	return m.PID <= 0 || !alive(m.PID)
}

// isOwnProcess reports whether pid is this member's etcd: a server started on its data dir and
// listening on its peer URL, the flags the sandbox starts it with (no other process can listen
// there; a tool given --data-dir has no --listen-peer-urls).
func (m *Member) isOwnProcess(pid int) bool {
	args := cmdline(pid)
	return local.SamePath(flagValue(args, "--data-dir"), m.DataDir) && flagValue(args, "--listen-peer-urls") == m.PeerURL
}

// NotMemberError is a pid in sandbox.json that runs something else than the member: it is left
// alone.
type NotMemberError struct {
	Member  string
	PID     int
	Command string
}

func (e *NotMemberError) Error() string {
	return fmt.Sprintf("pid %d, recorded for %s in %s, is not %s's etcd (it runs %q): not signalled; %s is not running", e.PID, e.Member, StateFile, e.Member, e.Command, e.Member)
}

// StopMember stops one member (SIGTERM, then SIGKILL after grace), keeping its data. Only the
// member's own process is signalled: a recorded pid that now runs something else is forgotten
// and reported as a NotMemberError.
func (sb *Sandbox) StopMember(name string, grace time.Duration) error {
	m, err := sb.Member(name)
	if err != nil {
		return err
	}
	err = m.stop(grace)
	m.PID = 0
	if serr := sb.save(); err == nil {
		err = serr
	}
	return err
}

// KillMember kills one member at once (SIGKILL), like a node losing power.
func (sb *Sandbox) KillMember(name string) error {
	return sb.StopMember(name, 0)
}

// StartMember restarts a stopped member on its data dir.
func (sb *Sandbox) StartMember(name string) error {
	return sb.StartMemberOn(name, sb.Command)
}

// StartMemberOn restarts a stopped member on its data dir with another etcd command (a binary
// swapped in place, as an operator upgrading by hand does).
func (sb *Sandbox) StartMemberOn(name string, command []string) error {
	m, err := sb.Member(name)
	if err != nil {
		return err
	}
	if m.Running() {
		return fmt.Errorf("member %s is already running (pid %d)", name, m.PID)
	}
	// Not only the recorded pid: an etcd another start (or anything else) left on the data dir.
	if pid, args, ok := local.FindProcess(m.DataDir); ok {
		return fmt.Errorf("member %s's data dir %s is in use by pid %d (%s), which %s does not record: not started; etcdmedic sandbox down --dir %s stops a stray etcd of the member", name, m.DataDir, pid, strings.Join(args, " "), StateFile, sb.Dir)
	}
	if err := sb.startOn(command, m, sb.initialCluster(), "existing"); err != nil {
		return err
	}
	return sb.save()
}

// Down stops every member. Data dirs and logs stay in place. A recorded pid that is not its
// member's etcd is left alone, and reported once every member has been stopped. Then each data
// dir is checked: an etcd of the member that sandbox.json does not record (a start that raced
// another) is stopped too; any other process on it is reported, never signalled. So Down
// returns nil only when nothing holds a member's data dir.
//
// The apiservers stop first, as a node's control plane does, all at once. The members stop one
// after the other: stopped together, a leader handing its leadership to a member that is
// stopping too waits out its whole grace.
func (sb *Sandbox) Down(grace time.Duration) error {
	var errs []error
	if sb.Kubernetes != nil {
		errs = append(errs, eachAtOnce(len(sb.Kubernetes.APIServers), func(i int) error {
			return sb.stopAPIServer(&sb.Kubernetes.APIServers[i], grace)
		})...)
	}
	for i := range sb.Members {
		if err := sb.Members[i].stop(grace); err != nil {
			errs = append(errs, err)
		}
		sb.Members[i].PID = 0
		errs = append(errs, sb.Members[i].stopStrays(grace))
	}
	if _, err := os.Stat(sb.Dir); err == nil {
		errs = append(errs, sb.save())
	}
	return errors.Join(errs...)
}

// stopStrays stops the member's etcd processes on its data dir that sandbox.json does not
// record, and reports any other process found there.
func (m *Member) stopStrays(grace time.Duration) error {
	for range 10 {
		pid, args, ok := local.FindProcess(m.DataDir)
		if !ok {
			return nil
		}
		foreign, err := stopOwn(pid, m.isOwnProcess, grace)
		if foreign {
			return fmt.Errorf("pid %d (%s) holds %s's data dir %s and is not %s's etcd: not signalled; stop it, then run sandbox down again", pid, strings.Join(args, " "), m.Name, m.DataDir, m.Name)
		}
		if err != nil {
			return fmt.Errorf("signal the etcd of %s that %s does not record (pid %d): %w", m.Name, StateFile, pid, err)
		}
	}
	return fmt.Errorf("%s's data dir %s is still in use after stopping every etcd of it found there", m.Name, m.DataDir)
}

// stop signals the member's etcd: SIGTERM, then SIGKILL after grace (SIGKILL at once when grace
// is 0). The process is pinned by a pidfd before it is checked, so the signal reaches the
// process that was checked even if its pid were reused in between.
func (m *Member) stop(grace time.Duration) error {
	foreign, err := stopOwn(m.PID, m.isOwnProcess, grace)
	if foreign {
		return &NotMemberError{Member: m.Name, PID: m.PID, Command: strings.Join(cmdline(m.PID), " ")}
	}
	if err != nil {
		return fmt.Errorf("signal %s's etcd (pid %d): %w", m.Name, m.PID, err)
	}
	return nil
}

// stopOwn signals pid, when own says it is the process the sandbox started: SIGTERM, then
// SIGKILL after grace (SIGKILL at once when grace is 0). It reports foreign, without a signal,
// when pid runs something else.
func stopOwn(pid int, own func(pid int) bool, grace time.Duration) (foreign bool, err error) {
	if pid <= 0 || !alive(pid) {
		return false, nil
	}
	p, err := pin(pid)
	if err != nil {
		return false, nil // exited meanwhile
	}
	defer p.release()
	if !own(pid) {
		return p.alive(), nil
	}
	sig := syscall.SIGTERM
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	if err := p.signal(sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil // exited meanwhile
		}
		return false, err
	}
	deadline := time.Now().Add(grace)
	for p.alive() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p.alive() {
		p.signal(syscall.SIGKILL)
		for i := 0; i < 100 && p.alive(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return false, nil
}

// WaitReady waits until the running members serve a linearizable read.
func (sb *Sandbox) WaitReady(ctx context.Context, timeout time.Duration) error {
	return sb.waitRead(ctx, timeout, func() error { return nil })
}

// waitRead waits until a linearizable read through the sandbox's members succeeds, giving up
// at the first error of broken (checked before each try, and once more at the timeout).
func (sb *Sandbox) waitRead(ctx context.Context, timeout time.Duration, broken func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cli, err := sb.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		if err := broken(); err != nil {
			return err
		}
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Get(rctx, "etcdmedic/sandbox/ready")
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if berr := broken(); berr != nil {
				return berr
			}
			return fmt.Errorf("sandbox not ready after %s: %v (member logs are in %s)", timeout, err, sb.Dir)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (sb *Sandbox) client() (*clientv3.Client, error) { return clientOf(sb.Endpoints()) }

// clientOf is a client over endpoints, as every sandbox command makes it.
func clientOf(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
}

// Client returns a client over every member; the caller closes it.
func (sb *Sandbox) Client() (*clientv3.Client, error) { return sb.client() }

// MemberStatus is one member's liveness and raft status.
type MemberStatus struct {
	Member
	Running   bool         `json:"running"`
	ID        etcdmedic.ID `json:"id,omitempty"`
	Leader    bool         `json:"leader"`
	IsLearner bool         `json:"isLearner"`
	RaftTerm  uint64       `json:"raftTerm,omitempty"`
	RaftIndex uint64       `json:"raftIndex,omitempty"`
	Revision  int64        `json:"revision,omitempty"`
	Version   string       `json:"version,omitempty"`
	Error     string       `json:"error,omitempty"`
}

// Status asks every running member for its status, each with its own short timeout.
func (sb *Sandbox) Status(ctx context.Context) []MemberStatus {
	out := make([]MemberStatus, len(sb.Members))
	cli, err := sb.client()
	for i, m := range sb.Members {
		st := MemberStatus{Member: m, Running: m.Running()}
		if st.Running && err == nil {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			resp, serr := cli.Status(sctx, m.ClientURL)
			cancel()
			if serr != nil {
				st.Error = serr.Error()
			} else {
				st.ID = etcdmedic.ID(resp.Header.MemberId)
				st.Leader = resp.Leader == resp.Header.MemberId
				st.IsLearner = resp.IsLearner
				st.RaftTerm, st.RaftIndex, st.Revision, st.Version = resp.RaftTerm, resp.RaftIndex, resp.Header.Revision, resp.Version
			}
		}
		out[i] = st
	}
	if cli != nil {
		cli.Close()
	}
	return out
}

// Env is the etcdctl-style environment to talk to the sandbox.
func (sb *Sandbox) Env() string {
	return "export ETCDCTL_API=3 ETCDCTL_ENDPOINTS=" + strings.Join(sb.Endpoints(), ",")
}

// freePorts chooses n distinct free ports on 127.0.0.1, outside the kernel's ephemeral range
// (see package freeport).
var freePorts = freeport.Ports

// eachAtOnce runs do(0) to do(n-1) at the same time and returns their errors, in order.
func eachAtOnce(n int, do func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = do(i)
		}()
	}
	wg.Wait()
	return errs
}
