package etcdtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	etcdruntime "github.com/etcdmedic/etcdmedic/runtime"
)

// victimEnv makes the re-executed test binary the victim of TestKilledTestBinaryLeavesNothing:
// it starts its processes, writes their pids to the file victimEnv names, and waits.
const victimEnv = "ETCDTEST_REAPER_VICTIM"

// A test binary killed with SIGKILL leaves nothing running: neither a process detached the way
// etcdmedic starts a sandbox member (its own session, etcdmedic's environment for members), nor
// an etcd member of the harness; and its run root is removed.
func TestKilledTestBinaryLeavesNothing(t *testing.T) {
	t.Parallel()
	if pidsFile := os.Getenv(victimEnv); pidsFile != "" {
		startAndWait(t, pidsFile)
		return
	}
	dir := t.TempDir()
	pidsFile, logPath := filepath.Join(dir, "pids"), filepath.Join(dir, "victim.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	victim := exec.Command(os.Args[0], "-test.run=^TestKilledTestBinaryLeavesNothing$", "-test.v")
	victim.Env = append(os.Environ(), victimEnv+"="+pidsFile)
	victim.Stdout, victim.Stderr = log, log
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { victim.Wait(); close(exited) }()
	t.Cleanup(func() { victim.Process.Kill(); <-exited })
	victimLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }

	var sleeper, member int
	var root string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		b, err := os.ReadFile(pidsFile)
		if err == nil {
			if _, err := fmt.Sscan(string(b), &sleeper, &member, &root); err == nil {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("the victim test binary exited before it started its processes:\n%s", victimLog())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the victim started no processes within 60 s:\n%s", victimLog())
		}
	}
	for _, pid := range []int{sleeper, member} {
		if !running(pid) {
			t.Fatalf("pid %d is not running before the kill:\n%s", pid, victimLog())
		}
	}
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited

	const bound = 15 * time.Second
	deadline := time.Now().Add(bound)
	for (running(sleeper) || running(member)) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if running(sleeper) {
		t.Errorf("the detached sleeper (pid %d) still runs %s after its test binary was killed", sleeper, bound)
		syscall.Kill(sleeper, syscall.SIGKILL)
	}
	if running(member) {
		t.Errorf("the etcd member (pid %d) still runs %s after its test binary was killed", member, bound)
		syscall.Kill(member, syscall.SIGKILL)
	}
	for time.Now().Before(deadline) {
		if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the victim's run root %s is still there (%v)", root, err)
	}
	if mounts, _ := mountsUnder(root); len(mounts) > 0 {
		t.Errorf("the victim's run root left mounted: %v", mounts) // its tmpfs (mountMemory)
	}
	for watchdogOf(root) != 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if pid := watchdogOf(root); pid != 0 {
		t.Errorf("the victim's watchdog (pid %d) still runs %s after its test binary was killed", pid, bound)
	}
	t.Logf("victim:\n%s", victimLog())
}

// startAndWait is the victim: a process detached as etcdmedic detaches a member, and a member
// of the harness; then it waits to be killed.
func startAndWait(t *testing.T, pidsFile string) {
	sleeper := exec.Command("sleep", "600")
	sleeper.Env = etcdruntime.Environ(nil) // what etcdmedic gives a member: TMPDIR among it
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	c := NewCluster(t, ClusterSpec{Size: 1, Version: V3_6})
	pids := fmt.Sprintf("%d %d %s\n", sleeper.Process.Pid, c.Member("m1").pid(), os.Getenv("TMPDIR"))
	if err := os.WriteFile(pidsFile+".tmp", []byte(pids), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pidsFile+".tmp", pidsFile); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Minute)
	t.Error("the victim was not killed within 2 minutes")
}

// watchdogOf returns the pid of the watchdog of run root root, or 0.
func watchdogOf(root string) int {
	for _, pid := range processes() {
		if environ(pid)[reaperRootEnv] == root {
			return pid
		}
	}
	return 0
}

// running reports whether pid is a live process (a zombie has exited).
func running(pid int) bool {
	_, err := startTime(pid)
	return err == nil
}

// Which run roots a process's TMPDIR, working dir or arguments name.
func TestRootsIn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/tmp/etcdmedic-test-42-7", []string{"/tmp/etcdmedic-test-42-7"}},
		{"/tmp/etcdmedic-test-42-7/TestX/001/m1.etcd", []string{"/tmp/etcdmedic-test-42-7"}},
		{"--data-dir=/var/tmp/etcdmedic-test-42-7/a", []string{"/var/tmp/etcdmedic-test-42-7"}},
		{"m1=/tmp/etcdmedic-test-42-7/a,m2=/tmp/b", []string{"/tmp/etcdmedic-test-42-7"}},
		{"/tmp/TestX123/001", nil},
		{"etcdmedic-test-42-7", nil},
	} {
		if got := rootsIn([]string{tc.path}); !slices.Equal(got, tc.want) {
			t.Errorf("rootsIn(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
