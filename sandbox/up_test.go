package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A member that exits before the sandbox is ready (here its etcd finds its port taken) fails
// sandbox up at once, with its log's last lines.
func TestAMemberThatExitsFailsTheSandboxAtOnce(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	etcd := filepath.Join(dir, "etcd")
	script := "#!/bin/sh\necho '{\"level\":\"fatal\",\"msg\":\"listen tcp 127.0.0.1:2380: bind: address already in use\"}' >&2\nexit 1\n"
	if err := os.WriteFile(etcd, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	// Waited for until the timeout, it would say "sandbox not ready after 2m0s".
	sb, err := Up(t.Context(), Options{Dir: filepath.Join(t.TempDir(), "sb"), Members: 1, Command: []string{etcd}, ReadyTimeout: 2 * time.Minute})
	if sb != nil {
		t.Cleanup(func() { sb.Down(5 * time.Second) })
	}
	if err == nil || !strings.Contains(err.Error(), "exited before the sandbox was ready") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Up: %v", err)
	}
}
