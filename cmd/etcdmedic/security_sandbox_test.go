package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// A sandbox under the usual umask keeps its folder, logs and state to its owner, starts its
// members without etcdmedic's environment, and never signals a pid that sandbox.json records
// unless it is that member's etcd: a planted `sleep` survives stop, kill and down.
func TestSandboxSignalsOnlyItsMembersAndKeepsItsFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	bin := etcdtest.EtcdmedicBinary(t)
	dir := filepath.Join(t.TempDir(), "sb")
	t.Cleanup(func() { exec.Command(bin, "sandbox", "down", "--dir", dir).Run() })

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	up := exec.CommandContext(ctx, bin, "sandbox", "up", "--dir", dir, "--members", "1")
	up.Env = append(os.Environ(), "ETCDCTL_PASSWORD=hunter2", "ETCD_LOG_LEVEL=debug")
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("sandbox up: %v\n%s", err, out)
	}
	for path, want := range map[string]os.FileMode{
		dir:                                   0o700,
		filepath.Join(dir, sandbox.StateFile): 0o600,
		filepath.Join(dir, "m1.log"):          0o600,
	} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, st.Mode().Perm(), err, want)
		}
	}
	m1 := sandboxStatus(t, bin, dir).Members[0]
	if !m1.Running {
		t.Fatalf("m1 not running: %+v", m1)
	}
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(m1.PID) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(environ), "\x00") {
		if strings.HasPrefix(kv, "ETCDCTL_") || strings.HasPrefix(kv, "ETCD_") {
			t.Errorf("the member inherited %s", kv)
		}
	}
	if code, out := runBinary(t, bin, "sandbox", "stop", "m1", "--dir", dir); code != 0 {
		t.Fatalf("stop the real m1: exit %d: %s", code, out)
	}

	sleep := exec.Command("sleep", "300")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { sleep.Wait(); close(exited) }()
	t.Cleanup(func() { sleep.Process.Kill(); <-exited })
	for _, args := range [][]string{{"stop", "m1"}, {"kill", "m1"}, {"down"}, {"down", "--purge"}} {
		plantPID(t, dir, "m1", sleep.Process.Pid)
		code, out := runBinary(t, bin, append(append([]string{"sandbox"}, args...), "--dir", dir)...)
		if code != exitFailed || !strings.Contains(out, "is not m1's etcd") || !strings.Contains(out, "not signalled") {
			t.Errorf("%v with a planted pid: exit %d, want %d and why:\n%s", args, code, exitFailed, out)
		}
		select {
		case <-exited:
			t.Fatalf("%v killed the planted sleep (pid %d)", args, sleep.Process.Pid)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := os.Stat(filepath.Join(dir, sandbox.StateFile)); err != nil {
		t.Errorf("down --purge with a pid it could not account for must not delete the sandbox: %v", err)
	}
	plantPID(t, dir, "m1", sleep.Process.Pid)
	if st := sandboxStatus(t, bin, dir); st.Members[0].Running {
		t.Errorf("status calls the planted sleep m1: %+v", st.Members[0])
	}
}

// plantPID records pid as member's in the sandbox's state file, as a stale or edited file would.
func plantPID(t *testing.T, dir, member string, pid int) {
	t.Helper()
	path := filepath.Join(dir, sandbox.StateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sb sandbox.Sandbox
	if err := json.Unmarshal(b, &sb); err != nil {
		t.Fatal(err)
	}
	for i := range sb.Members {
		if sb.Members[i].Name == member {
			sb.Members[i].PID = pid
		}
	}
	if b, err = json.Marshal(sb); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
