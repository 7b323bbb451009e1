package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// fakeMemberEnv makes this test binary a stand-in member: it sleeps, whatever its arguments.
const fakeMemberEnv = "ETCDMEDIC_SANDBOX_FAKE_MEMBER"

func TestMain(m *testing.M) {
	if os.Getenv(fakeMemberEnv) == "1" {
		time.Sleep(5 * time.Minute)
		os.Exit(0)
	}
	os.Exit(etcdtest.Main(m, etcdtest.Needs{Servers: []string{etcdtest.V3_6}, KubeAPIServer: true}))
}

// Which processes a member's recorded pid may be signalled as: only its own etcd, by its
// data dir and peer URL; a planted sleep, or a process on its data dir but another peer URL,
// is left running.
func TestStopSignalsOnlyTheMembersOwnProcess(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "m1.etcd")
	m := Member{Name: "m1", DataDir: dataDir, PeerURL: "http://127.0.0.1:23801"}
	for _, tc := range []struct {
		name    string
		argv    []string
		stopped bool
	}{
		{"the member's etcd", []string{os.Args[0], "etcd", "--name", "m1", "--data-dir", dataDir, "--listen-peer-urls", m.PeerURL}, true},
		{"its etcd, flags with =", []string{os.Args[0], "etcd", "--data-dir=" + dataDir, "--listen-peer-urls=" + m.PeerURL}, true},
		{"a planted sleep", []string{"sleep", "300"}, false},
		{"another member's etcd", []string{os.Args[0], "etcd", "--data-dir", dataDir, "--listen-peer-urls", "http://127.0.0.1:23802"}, false},
		{"a tool given the data dir", []string{os.Args[0], "guard", "--data-dir", dataDir}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
			cmd.Env = append(os.Environ(), fakeMemberEnv+"=1")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			t.Cleanup(func() { cmd.Process.Kill(); <-exited })

			waitExeced(t, cmd.Process.Pid, tc.argv)
			m := m
			m.PID = cmd.Process.Pid
			if m.Running() != tc.stopped {
				t.Errorf("Running() = %v before the stop, want %v", m.Running(), tc.stopped)
			}
			err := m.stop(5 * time.Second)
			var notMember *NotMemberError
			if tc.stopped != (err == nil) || !tc.stopped && !errors.As(err, &notMember) {
				t.Fatalf("stop: %v", err)
			}
			select {
			case <-exited:
				if !tc.stopped {
					t.Fatalf("pid %d (%v) was signalled", m.PID, tc.argv)
				}
			case <-time.After(500 * time.Millisecond):
				if tc.stopped {
					t.Fatalf("the member's process still runs")
				}
			}
		})
	}
}

// waitExeced waits (at most 10 s) until process pid runs argv: right after Start it may still
// be the forked test binary, whose command line is not yet the member's (seen on a busy machine:
// Running() false before the stop).
func waitExeced(t *testing.T, pid int, argv []string) {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d does not run %v after 10 s", pid, argv)
		}
	}
}

// A sandbox's folder and files are its owner's only, whatever the umask and whatever mode an
// earlier file had.
func TestSandboxFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), "sb")
	if err := makePrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "m1.log")
	if err := os.WriteFile(log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := openPrivate(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	sb := &Sandbox{Dir: dir}
	if err := sb.save(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, log: 0o600, filepath.Join(dir, StateFile): 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v (%v), want %v", path, st.Mode().Perm(), err, want)
		}
	}
	if err := makePrivateDir(dir); err == nil {
		t.Errorf("a folder that is not empty was taken for a new sandbox")
	}
}
