package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
