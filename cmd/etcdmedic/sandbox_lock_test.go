package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic/runlock"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// Two sandbox commands that change one sandbox never run at once (two `sandbox start m2` from
// a retry loop started two etcds on m2's data dir and recorded one): while another run holds the
// sandbox, each is refused before it reads or changes anything; status still reads it.
func TestSandboxCommandsTakeTheSandboxLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sb")
	os.Mkdir(dir, 0o700)
	state, _ := json.Marshal(sandbox.Sandbox{Dir: dir, Members: []sandbox.Member{{Name: "m2", DataDir: filepath.Join(dir, "m2.etcd"), ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2"}}})
	os.WriteFile(filepath.Join(dir, sandbox.StateFile), state, 0o600)
	held, err := runlock.Acquire(dir, "another sandbox start")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	for _, args := range [][]string{
		{"sandbox", "start", "m2"}, {"sandbox", "stop", "m2"}, {"sandbox", "kill", "m2"}, {"sandbox", "down", "--purge"},
		{"sandbox", "up", "--members", "1"}, {"sandbox", "demo"},
	} {
		code, out, errOut := runCLI(t, append(args, "--dir", dir)...)
		if code == 0 || !strings.Contains(errOut, "in use by another etcdmedic run") {
			t.Errorf("%s while the sandbox is held: exit %d\nstdout %q\nstderr %q", strings.Join(args, " "), code, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, sandbox.StateFile)); err != nil {
		t.Errorf("the held sandbox was changed: %v", err)
	}
	if code, out, errOut := runCLI(t, "sandbox", "status", "--dir", dir); code != 0 {
		t.Errorf("status while the sandbox is held: exit %d\n%s%s", code, out, errOut)
	}
}
