package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// fakeEtcd makes the test binary wait instead of testing: started with argv[0] "etcd", it is
// an etcd to /proc, configured by the command line, environment and working directory given.
const fakeEtcd = "ETCDMEDIC_TEST_FAKE_ETCD"

// startFakeEtcd starts one, waits until /proc shows it as etcd, and returns its pid and a
// channel closed when it exits.
func startFakeEtcd(t *testing.T, dir string, args, env []string) (int, <-chan struct{}) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := os.StartProcess(self, append([]string{"etcd"}, args...), &os.ProcAttr{
		Dir: dir, Env: append([]string{fakeEtcd + "=1"}, env...),
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { p.Wait(); close(exited) }()
	t.Cleanup(func() { p.Kill(); <-exited })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid)); strings.HasPrefix(string(b), "etcd\x00") {
			return p.Pid, exited
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake etcd %d never showed its command line", p.Pid)
		}
	}
}

// FindProcess reads a process's data dir as etcd resolves it, so it finds a member configured
// by a config file, a relative path or a single-dash flag, and never takes an etcd serving
// another data dir for the member (Stop would then signal it).
func TestFindProcessResolvesTheDataDirAsEtcdDoes(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o700)
	config := filepath.Join(dir, "etcd.conf.yml")
	os.WriteFile(config, []byte("name: c1\ndata-dir: "+filepath.Join(dir, "from-config")+"\n"), 0o600)
	for _, tc := range []struct {
		situation string
		args, env []string
		dataDir   string // asked for
		found     bool
	}{
		{"a relative --data-dir, under its working directory", []string{"--data-dir", "m1.etcd"}, nil, filepath.Join(work, "m1.etcd"), true},
		{"a single-dash -data-dir", []string{"-data-dir=" + filepath.Join(dir, "m2.etcd")}, nil, filepath.Join(dir, "m2.etcd"), true},
		{"no data dir: <name>.etcd under its working directory", []string{"--name", "m3"}, nil, filepath.Join(work, "m3.etcd"), true},
		{"a config file naming the data dir", []string{"--config-file", config}, nil, filepath.Join(dir, "from-config"), true},
		{"a config file, and a leftover ETCD_DATA_DIR of another member: not that member", []string{"--config-file", config},
			[]string{"ETCD_DATA_DIR=" + filepath.Join(dir, "m4.etcd")}, filepath.Join(dir, "m4.etcd"), false},
		{"ETCD_CONFIG_FILE beside a --data-dir etcd ignores: not that member", []string{"--data-dir", filepath.Join(dir, "m5.etcd")},
			[]string{"ETCD_CONFIG_FILE=" + config}, filepath.Join(dir, "m5.etcd"), false},
		{"a relative --data-dir is not the same name under another folder", []string{"--data-dir", "m6.etcd"}, nil, filepath.Join(dir, "m6.etcd"), false},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			pid, exited := startFakeEtcd(t, work, tc.args, tc.env)
			got, _, found := local.FindProcess(tc.dataDir)
			if found != tc.found || found && got != pid {
				t.Fatalf("FindProcess(%s) = %d, %v; want the fake etcd %d: %v", tc.dataDir, got, found, pid, tc.found)
			}
			if tc.found {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			local.Runtime{Grace: time.Second}.Stop(ctx, runtime.MemberSpec{Name: "m", DataDir: tc.dataDir})
			select {
			case <-exited:
				t.Errorf("Stop on %s signalled pid %d, an etcd serving another data dir", tc.dataDir, pid)
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}

// An etcd FromCommand does not know by its name (a distribution's openshift-etcd, a versioned
// pd-server-v7.5) is still found by the data dir it was given.
func TestFindProcessOfAnEtcdUnderAnotherName(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := os.StartProcess(self, []string{"openshift-etcd", "--data-dir", "m8.etcd"}, &os.ProcAttr{
		Dir: dir, Env: []string{fakeEtcd + "=1"}, Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); p.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got, _, found := local.FindProcess(filepath.Join(dir, "m8.etcd")); found && got == p.Pid {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("FindProcess never found openshift-etcd %d on its --data-dir", p.Pid)
		}
	}
}

// Asked with a relative path (member add --start --data-dir m2.etcd, a sandbox): it is under
// etcdmedic's working directory, as the etcd it started resolves it under its own.
func TestFindProcessAskedWithARelativePath(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	pid, _ := startFakeEtcd(t, work, []string{"--data-dir", "m7.etcd"}, nil)
	if got, _, found := local.FindProcess("m7.etcd"); !found || got != pid {
		t.Fatalf("FindProcess(m7.etcd) = %d, %v; want the fake etcd %d", got, found, pid)
	}
	if !local.SamePath("m7.etcd", filepath.Join(work, "m7.etcd")) {
		t.Error("a relative path and its absolute form are not the same folder")
	}
}
