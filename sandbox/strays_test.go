package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// processesWith lists the live processes whose command line contains s.
func processesWith(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		if strings.Contains(strings.Join(cmdline(pid), " "), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitingScript is a stand-in server: it runs, whatever its flags, and never serves.
func waitingScript(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\nwhile :; do sleep 1; done\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// Two `sandbox start m2` at once (two shells, a retry loop): the second etcd runs on the data
// dir while sandbox.json records the first. Start refuses whatever holds the data dir, not only
// the recorded pid; Down stops a stray etcd of the member and reports anything else, so that
// down --purge never deletes a data dir under a running process.
func TestAProcessOnAMembersDataDirThatSandboxJSONDoesNotRecord(t *testing.T) {
	for _, tc := range []struct {
		situation string
		peerURL   string // the stray's --listen-peer-urls
		stopped   bool   // by Down
	}{
		{"the member's etcd from a start that raced this one", "http://127.0.0.1:23811", true},
		{"another etcd on the member's data dir (another peer URL)", "http://127.0.0.1:23812", false},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			dir := t.TempDir()
			m := Member{Name: "m2", DataDir: filepath.Join(dir, "m2.etcd"), PeerURL: "http://127.0.0.1:23811", ClientURL: "http://127.0.0.1:23791", LogFile: filepath.Join(dir, "m2.log")}
			sb := &Sandbox{Dir: dir, Command: []string{"/bin/false"}, Members: []Member{m}}
			argv := []string{"etcd", "--name", "m2", "--data-dir", m.DataDir, "--listen-peer-urls", tc.peerURL}
			cmd := exec.Command(os.Args[0])
			cmd.Args = argv
			cmd.Env = append(os.Environ(), fakeMemberEnv+"=1")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			t.Cleanup(func() { cmd.Process.Kill(); <-exited })
			waitExeced(t, cmd.Process.Pid, argv)

			err := sb.StartMemberOn("m2", sb.Command)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d", cmd.Process.Pid)) {
				t.Fatalf("StartMemberOn: %v, want a refusal naming pid %d", err, cmd.Process.Pid)
			}
			err = sb.Down(2 * time.Second)
			select {
			case <-exited:
				if !tc.stopped {
					t.Fatalf("Down signalled pid %d, not the member's etcd", cmd.Process.Pid)
				}
				if err != nil {
					t.Errorf("Down: %v", err)
				}
			case <-time.After(500 * time.Millisecond):
				if tc.stopped {
					t.Fatalf("Down left the member's unrecorded etcd running (err %v)", err)
				}
				if err == nil || !strings.Contains(err.Error(), "not signalled") {
					t.Errorf("Down: %v, want the process on the data dir reported", err)
				}
			}
		})
	}
}

// sandbox up that fails once its members run (not ready in time, or interrupted with Ctrl-C)
// stops them: it used to leave every member running, with only "member logs are in DIR".
func TestAFailedSandboxUpLeavesNoMemberRunning(t *testing.T) {
	for _, tc := range []struct {
		situation string
		interrupt bool
	}{
		{"not ready within the timeout", false},
		{"interrupted", true},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sb")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.interrupt {
				time.AfterFunc(time.Second, cancel)
			}
			sb, err := Up(ctx, Options{Dir: dir, Members: 2, Command: []string{waitingScript(t, "etcd")}, ReadyTimeout: 3 * time.Second})
			if sb != nil {
				t.Cleanup(func() { sb.Down(time.Second) })
			}
			var failed *UpFailedError
			if err == nil || !errors.As(err, &failed) || sb != nil {
				t.Fatalf("Up: %v, %v", sb, err)
			}
			if pids := processesWith(dir); len(pids) > 0 {
				t.Errorf("members still running after a failed up: %v", pids)
			}
			if saved, err := Load(dir); err != nil || saved.Members[0].PID != 0 || saved.Members[1].PID != 0 {
				t.Errorf("sandbox.json after a failed up: %+v, %v", saved, err)
			}
		})
	}
}

// An apiserver that cannot be started (here its log cannot be opened) after others were:
// those are stopped, not left running where sandbox.json does not record them.
func TestAFailedAPIServerStartLeavesNoneRunning(t *testing.T) {
	dir := t.TempDir()
	sb := &Sandbox{Dir: dir, Members: []Member{{Name: "m1", ClientURL: "http://127.0.0.1:23791"}, {Name: "m2", ClientURL: "http://127.0.0.1:23792"}}}
	if err := os.Mkdir(filepath.Join(dir, "m2-apiserver.log"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := sb.StartKubernetes(t.Context(), waitingScript(t, "kube-apiserver"), 10*time.Second)
	t.Cleanup(func() {
		for _, pid := range processesWith(filepath.Join(dir, "kubernetes")) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "apiserver log") {
		t.Fatalf("StartKubernetes: %v", err)
	}
	if pids := processesWith(filepath.Join(dir, "kubernetes", "m1")); len(pids) > 0 {
		t.Errorf("m1's apiserver still runs after m2's failed to start: %v", pids)
	}
	if saved, err := Load(dir); err != nil || saved.Kubernetes != nil {
		t.Errorf("sandbox.json after the failed start: %+v, %v", saved, err)
	}
}
