package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// clusterWithSecrets is one member holding about 16 MB of "Secrets": streaming its db takes a
// moment, and every copy of it is as sensitive as the cluster.
func clusterWithSecrets(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	cli := c.Client(t)
	val := make([]byte, 128<<10)
	for i := range 128 {
		rand.Read(val)
		if _, err := cli.Put(t.Context(), fmt.Sprintf("/registry/secrets/default/s%03d", i), string(val)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// freeze stops (SIGSTOP) the processes of a member, so that a snapshot it streams stops
// mid-way; the returned func, also registered as a cleanup, lets them go on.
func freeze(t *testing.T, m *etcdtest.Member) func() {
	t.Helper()
	pids := local.Holders(m.DataDir)
	if len(pids) == 0 {
		t.Fatalf("no process holds %s", m.DataDir)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	thaw := func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	return thaw
}

// interruptMidCopy runs the built etcdmedic with args and its own TMPDIR, waits until the copy
// (copyGlob, under TMPDIR) exists, freezes the member mid-stream, checks the copy is private,
// sends SIGTERM, and checks that etcdmedic exits non-zero naming the signal, leaving nothing in
// TMPDIR.
func interruptMidCopy(t *testing.T, m *etcdtest.Member, copyGlob string, args ...string) {
	t.Helper()
	tmp := t.TempDir()
	cmd := exec.Command(etcdtest.EtcdmedicBinary(t), args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	var copyPath string
	for deadline := time.Now().Add(60 * time.Second); copyPath == ""; time.Sleep(time.Millisecond) {
		if found, _ := filepath.Glob(filepath.Join(tmp, copyGlob)); len(found) > 0 {
			copyPath = found[0]
		}
		select {
		case err := <-exited:
			t.Fatalf("etcdmedic %s ended (%v) before its copy appeared\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in TMPDIR after 60 s", copyGlob)
		}
	}
	thaw := freeze(t, m)
	if st, err := os.Stat(copyPath); err == nil {
		t.Logf("%s: %d bytes when the member was frozen", copyPath, st.Size())
		wantMode(t, copyPath, 0o600)
		for d := filepath.Dir(copyPath); d != tmp; d = filepath.Dir(d) {
			wantMode(t, d, 0o700)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("etcdmedic did not end within 30 s of SIGTERM\n%s", stderr.String())
	}
	thaw()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || exit.ExitCode() == -1 {
		t.Errorf("want a non-zero exit of its own after SIGTERM, got %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "terminated") {
		t.Errorf("stderr does not say it was stopped by SIGTERM: %q", stderr.String())
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "*"))
	if len(left) > 0 {
		t.Errorf("left behind in TMPDIR after SIGTERM: %v", left)
	}
}

// A SIGTERM in the middle of a command that copies a member's db (the copy holds every Secret)
// removes the copy before etcdmedic exits, non-zero.
func TestSIGTERMMidCopyLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	c := clusterWithSecrets(t)
	m := c.Member("m1")
	t.Run("upgrade check --fetch-backends", func(t *testing.T) {
		interruptMidCopy(t, m, "etcdmedic-fetch-*/db.partial",
			"upgrade", "check", "--to", "v3.7.3", "--endpoints", strings.Join(c.Endpoints(), ","), "--fetch-backends")
	})
	t.Run("inspect --live-endpoint", func(t *testing.T) {
		interruptMidCopy(t, m, "etcdmedic-livecopy-*/member/snap/db.partial",
			"inspect", m.DataDir, "--live-endpoint", m.ClientURL)
	})
}

// doctor --watch runs until interrupted: SIGTERM ends it with the verdict of its last round,
// as a single doctor run would give, and no error line.
func TestSIGTERMEndsDoctorWatchWithItsVerdict(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	eps := strings.Join(c.Endpoints(), ",")
	want, _, _ := runCLI(t, "doctor", "--endpoints", eps)

	cmd := exec.Command(etcdtest.EtcdmedicBinary(t), "doctor", "--endpoints", eps, "--watch", "200ms")
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	// A few rounds after the first: a fixed 1.5 s once ended it before it had started (a
	// SIGTERM before its handler is in place kills it, as it would any process).
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stdout.String(), c.Member("m1").Name); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("doctor --watch printed no round within 30 s:\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("doctor --watch did not end within 10 s of SIGTERM")
	}
	if got := cmd.ProcessState.ExitCode(); got != want || strings.Contains(stderr.String(), "Error") {
		t.Errorf("doctor --watch ended by SIGTERM: exit %d (a single doctor run: %d), stderr %q", got, want, stderr.String())
	}
	if !strings.Contains(stdout.String(), c.Member("m1").Name) {
		t.Errorf("doctor --watch printed no member table:\n%s", stdout.String())
	}
}

// A drill interrupted by SIGTERM while its cluster runs under load stops every member it
// started and removes its folder (data dirs, plans, backups: copies of the cluster's data)
// before it exits 3, the drill reported STOPPED. It exited 2 with the drill FAILED: its
// repair's error on the way down ("cannot tell whether quorum is lost ... operation was
// canceled") was taken for the drill's verdict.
func TestSIGTERMMidDrillLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	t.Cleanup(func() { etcdtest.KillUnder(tmp) })
	cmd := exec.Command(etcdtest.EtcdmedicBinary(t), "drill", "quorum-loss")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), "workload started"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the drill's cluster did not come under load within 60 s:\n%s", out.String())
		}
	}
	if len(etcdtest.ProcessesUnder(tmp)) == 0 {
		t.Fatal("no member of the drill found running under TMPDIR")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the drill did not end within 30 s of SIGTERM:\n%s", out.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(out.String(), "STOPPED") || strings.Contains(out.String(), "FAILED") {
		t.Errorf("want exit %d after SIGTERM, the drill STOPPED, not FAILED; got %v\n%s", exitFailed, err, out.String())
	}
	if pids := etcdtest.ProcessesUnder(tmp); len(pids) > 0 {
		t.Errorf("still running after the drill ended: %v", pids)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
		t.Errorf("left behind in TMPDIR: %v", left)
	}
}

// lockedBuffer is a buffer a running command writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
