package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Only a process that writes the data dir's files is its member: a backup tool or a pager
// reading them must never be taken for it, and killed as it.
func TestHoldersAreWritersOnly(t *testing.T) {
	dir := t.TempDir()
	wal := filepath.Join(dir, "member", "wal", "0000000000000000-0000000000000000.wal")
	if err := os.MkdirAll(filepath.Dir(wal), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wal, []byte("wal"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(script string) int {
		cmd := exec.Command("bash", "-c", script, "--", wal)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process.Pid
	}
	reader := start(`exec 3<"$1"; exec sleep 30`)
	writer := start(`exec 3>>"$1"; exec sleep 30`)
	other := t.TempDir() // a data dir whose name starts like this one's
	if err := os.Symlink(dir, other+"-link"); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for range 50 {
		if pids = Holders(dir); slices.Contains(pids, writer) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Contains(pids, writer) || slices.Contains(pids, reader) {
		t.Fatalf("holders %v: want the writer %d and not the reader %d", pids, writer, reader)
	}
	if got := Holders(other); len(got) != 0 {
		t.Errorf("holders of another data dir: %v", got)
	}
	if got := Holders(other + "-link"); !slices.Contains(got, writer) {
		t.Errorf("holders through a link to the data dir: %v", got)
	}
}

func TestLooksLikeEtcd(t *testing.T) {
	for args, want := range map[string]bool{
		"/usr/local/bin/etcd":               true,
		"/usr/bin/pd-server":                true,
		"/usr/local/bin/etcdctl":            false,
		"/usr/local/bin/etcdutl":            false,
		"/usr/local/bin/etcdmedic":          false,
		"/usr/local/bin/bash":               false,
		"/opt/etcd-v3.5.19/etcd-3.5":        true,
		"/usr/local/bin/etcdmedic\x00etcd":  true,
		"/usr/local/bin/etcdmedic\x00guard": false,
	} {
		if got := looksLikeEtcd(splitArgs(args)); got != want {
			t.Errorf("%q: %v, want %v", args, got, want)
		}
	}
}

func splitArgs(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
