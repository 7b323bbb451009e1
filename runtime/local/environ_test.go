package local_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/internal/freeport"
	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// A member etcdmedic starts gets an explicit environment: the operator's etcdctl password stays
// out of its /proc/PID/environ, and an ETCD_* of the shell reaches it only when passed by name.
func TestStartedMemberEnvironment(t *testing.T) {
	t.Setenv("ETCDCTL_PASSWORD", "s3cret")
	t.Setenv("ETCDCTL_USER", "root")
	t.Setenv("ETCD_QUOTA_BACKEND_BYTES", "4294967296")
	command := []string{etcdtest.EtcdmedicBinary(t), "etcd"}

	env := startedEnviron(t, local.Runtime{Command: command})
	for _, name := range []string{"ETCDCTL_PASSWORD", "ETCDCTL_USER", "ETCD_QUOTA_BACKEND_BYTES"} {
		if _, ok := env[name]; ok {
			t.Errorf("the member inherited %s: %v", name, env)
		}
	}
	if env["PATH"] != os.Getenv("PATH") {
		t.Errorf("PATH: %q, want etcdmedic's %q", env["PATH"], os.Getenv("PATH"))
	}

	passed, err := runtime.Passed([]string{"ETCD_QUOTA_BACKEND_BYTES"})
	if err != nil {
		t.Fatal(err)
	}
	env = startedEnviron(t, local.Runtime{Command: command, Env: passed})
	if env["ETCD_QUOTA_BACKEND_BYTES"] != "4294967296" {
		t.Errorf("--pass-env ETCD_QUOTA_BACKEND_BYTES: the member has %q", env["ETCD_QUOTA_BACKEND_BYTES"])
	}
	if _, ok := env["ETCDCTL_PASSWORD"]; ok {
		t.Errorf("passing an ETCD_* variable let ETCDCTL_PASSWORD through: %v", env)
	}
}

func TestPassedRefusesWhatIsNotEtcds(t *testing.T) {
	t.Setenv("ETCD_NAME", "m9")
	t.Setenv("ETCD_QUOTA_BACKEND_BYTES", "4294967296")
	os.Unsetenv("ETCD_UNSET_FOR_TEST")
	// ETCD_NAME: etcdmedic starts every member with --name, and etcd refuses a flag and its
	// variable both set (this test used to expect it passed).
	for _, names := range [][]string{{"ETCDCTL_PASSWORD"}, {"HOME"}, {"ETCD_NAME=m1"}, {"ETCD_UNSET_FOR_TEST"}, {"ETCD_NAME"}} {
		if got, err := runtime.Passed(names); err == nil {
			t.Errorf("Passed(%q) = %q, want an error", names, got)
		}
	}
	if got, err := runtime.Passed([]string{"ETCD_QUOTA_BACKEND_BYTES"}); err != nil || len(got) != 1 || got[0] != "ETCD_QUOTA_BACKEND_BYTES=4294967296" {
		t.Errorf("Passed(ETCD_QUOTA_BACKEND_BYTES) = %q, %v", got, err)
	}
	// A plan edited by hand cannot smuggle anything else in.
	for _, kv := range runtime.EnvironOf([]string{"ETCDCTL_PASSWORD=x", "LD_PRELOAD=/tmp/x.so", "ETCD_NAME=m1"}) {
		if strings.HasPrefix(kv, "ETCDCTL_") || strings.HasPrefix(kv, "LD_PRELOAD=") {
			t.Errorf("EnvironOf kept %s", kv)
		}
	}
}

// startedEnviron starts a real member with rt on free ports and returns its process
// environment as /proc shows it; the member is stopped when the test ends.
func startedEnviron(t *testing.T, rt local.Runtime) map[string]string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m1.etcd")
	client, peer := freePort(t), freePort(t)
	spec := runtime.MemberSpec{Name: "m1", DataDir: dir, ClientURLs: []string{client}, PeerURLs: []string{peer},
		InitialCluster: "m1=" + peer, ClusterState: "new"}
	if err := rt.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(context.Background(), spec) })
	b, err := os.ReadFile(local.PIDFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// Read once etcd serves: read while the started process is still exec-ing etcd, its
	// environ can be empty (seen once).
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(client, "http://"), time.Second)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member never listened on %s\n%s", client, readLog(dir))
		}
		time.Sleep(50 * time.Millisecond)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("the member (pid %d) does not run: %v\n%s", pid, err, readLog(dir))
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(raw, []byte{0}) {
		if name, value, ok := strings.Cut(string(kv), "="); ok {
			env[name] = value
		}
	}
	return env
}

// freePort is a port outside the ephemeral range, claimed against every other test process
// (a port of that range can be taken by any outgoing connection before etcd binds it).
func freePort(t *testing.T) string {
	t.Helper()
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0])
}

func readLog(dataDir string) string {
	b, _ := os.ReadFile(local.LogFile(dataDir))
	return string(b)
}
