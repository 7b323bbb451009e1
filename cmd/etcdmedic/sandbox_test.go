package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// runBinary runs the built etcdmedic (sandbox members are `etcdmedic etcd` child processes, so
// the sandbox is tested through the real binary).
func runBinary(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	return runBinaryWithin(t, 3*time.Minute, bin, args...)
}

// runBinaryWithin is runBinary with its own bound on the command's time.
func runBinaryWithin(t *testing.T, limit time.Duration, bin string, args ...string) (int, string) {
	t.Helper()
	return etcdtest.RunWithin(t, limit, bin, args...)
}

func sandboxStatus(t *testing.T, bin, dir string) sandboxResult {
	t.Helper()
	code, out := runBinary(t, bin, "sandbox", "status", "--dir", dir, "-w", "json")
	var res sandboxResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("sandbox status: exit %d: %s", code, out)
	}
	return res
}

func TestSandboxMembersStopAndStartLikeNodes(t *testing.T) {
	t.Parallel()
	bin := etcdtest.EtcdmedicBinary(t)
	dir := filepath.Join(t.TempDir(), "sb")
	t.Cleanup(func() { exec.Command(bin, "sandbox", "down", "--dir", dir).Run() })

	if code, out := runBinary(t, bin, "sandbox", "up", "--dir", dir); code != 0 || !strings.Contains(out, "ETCDCTL_ENDPOINTS=") {
		t.Fatalf("sandbox up: exit %d: %s", code, out)
	}
	st := sandboxStatus(t, bin, dir)
	leaders := 0
	for _, m := range st.Members {
		if !m.Running || m.Error != "" {
			t.Errorf("%s not serving: %+v", m.Name, m)
		}
		if m.Leader {
			leaders++
		}
	}
	if len(st.Members) != 3 || leaders != 1 {
		t.Fatalf("want 3 members and 1 leader: %+v", st.Members)
	}
	if code, out := runBinary(t, bin, "sandbox", "kill", "m2", "--dir", dir); code != 0 {
		t.Fatalf("kill: %s", out)
	}
	if st := sandboxStatus(t, bin, dir); st.Members[1].Running {
		t.Fatalf("m2 still running after kill: %+v", st.Members[1])
	}
	if code, out := runBinary(t, bin, "sandbox", "start", "m2", "--dir", dir); code != 0 {
		t.Fatalf("start: %s", out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		m2 := sandboxStatus(t, bin, dir).Members[1]
		if m2.Running && m2.Error == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m2 did not come back: %+v", m2)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if code, out := runBinary(t, bin, "sandbox", "down", "--dir", dir); code != 0 || !strings.Contains(out, "kept") {
		t.Fatalf("down: %s", out)
	}
	for _, m := range sandboxStatus(t, bin, dir).Members {
		if m.Running {
			t.Errorf("%s still running after down", m.Name)
		}
	}
}

// The README's first command: it must work on a fresh machine and end clean.
func TestSandboxDemo(t *testing.T) {
	t.Parallel()
	bin := etcdtest.EtcdmedicBinary(t)
	code, out := runBinary(t, bin, "sandbox", "demo")
	if code != 0 || !strings.Contains(out, "FINDINGS: none") || !strings.Contains(out, "REVISION") {
		t.Fatalf("demo: exit %d:\n%s", code, out)
	}
}
