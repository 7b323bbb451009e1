package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// silentEndpoint is an address that takes TCP connections and never answers: a probe of it
// waits until its timeout, long enough to be interrupted.
func silentEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// interruptedProbe runs the built etcdmedic probing a silent endpoint, with stderr to
// stderr, sends it SIGINT once it is probing, and returns how it exited.
func interruptedProbe(t *testing.T, stderr *os.File) *exec.ExitError {
	t.Helper()
	cmd := exec.Command(etcdtest.EtcdmedicBinary(t), "member", "remove", "x", "--endpoints", silentEndpoint(t),
		"--dial-timeout", "30s", "--command-timeout", "30s")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	time.Sleep(time.Second)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("etcdmedic interrupted: %v, want a non-zero exit", err)
		}
		return ee
	case <-time.After(20 * time.Second):
		t.Fatal("etcdmedic did not stop on SIGINT")
	}
	return nil
}

// Review finding 7: Ctrl-C during a probe of the cluster came back as "refused: no member of
// the cluster answered", exit 2 (refused, nothing changed), where the README says a command
// stopped by a signal exits 3. It exits 3, and its hint is about the stop.
func TestSignalDuringAProbeExits3(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	read := make(chan struct{})
	go func() { errOut.ReadFrom(r); close(read) }()
	ee := interruptedProbe(t, w)
	w.Close()
	<-read
	if ee.ExitCode() != exitFailed || !strings.Contains(errOut.String(), "stopped: interrupt") || strings.Contains(errOut.String(), "nothing was changed") {
		t.Fatalf("interrupted probe: exit %d\n%s", ee.ExitCode(), errOut.String())
	}
}

// Review finding 8: Ctrl-C in `etcdmedic ... 2>&1 | tee log` kills tee too, and etcdmedic's
// next line on the closed pipe killed it with SIGPIPE (exit 141), before any cleanup. It gets
// EPIPE instead, stops as for the signal, and exits 3.
func TestSignalWithItsOutputPipeClosedExits3(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone
	ee := interruptedProbe(t, w)
	w.Close()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("etcdmedic was killed by %v, want it to stop by itself with exit 3", ws.Signal())
	}
	if ee.ExitCode() != exitFailed {
		t.Fatalf("exit %d, want %d", ee.ExitCode(), exitFailed)
	}
}

// backup run stopped by SIGTERM exits 0, as asked; stopped because its output pipe closed (its
// log reader died), it exits 3, so that a supervisor that restarts it on failure does (review
// of the fixes, 3: it exited 0, and backups stopped without a word).
func TestBackupRunWhoseOutputClosedExits3(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone
	cmd := exec.Command(etcdtest.EtcdmedicBinary(t), "backup", "run", "--store", "file://"+t.TempDir(),
		"--endpoints", c.Members()[0].ClientURL, "--segment", "200ms")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitFailed {
			t.Fatalf("backup run with its output closed: %v, want exit %d", err, exitFailed)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("backup run went on with its output closed")
	}
}
