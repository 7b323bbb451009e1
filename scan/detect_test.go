package scan

import (
	"os"
	"path/filepath"
	"testing"
)

// What passes for a PD join file: each row a file named join that scan meets.
func TestIsPDJoin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		contents string
		want     bool
	}{
		{"one member", "pd-1=http://10.0.0.1:2380", true},
		{"three members, https, newline", "pd-1=https://a:2380,pd-2=https://b:2380,pd-3=https://c:2380\n", true},
		{"coreutils join (/usr/bin/join)", "\x7fELF\x02\x01\x01\x00\x00\x00", false},
		{"a shell script", "#!/bin/sh\nexec join \"$@\"\n", false},
		{"empty", "", false},
		{"no URL", "pd-1", false},
		{"not a peer URL", "pd-1=10.0.0.1:2380", false},
		{"no name", "=http://10.0.0.1:2380", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "join")
			if err := os.WriteFile(p, []byte(tc.contents), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := isPDJoin(p); got != tc.want {
				t.Errorf("isPDJoin(%q) = %v, want %v", tc.contents, got, tc.want)
			}
		})
	}
	if isPDJoin(t.TempDir()) {
		t.Error("a folder named join is not a PD join file")
	}
}

// The folders scan never enters, as resolved paths.
func TestKernelFS(t *testing.T) {
	for path, want := range map[string]bool{
		"/proc": true, "/proc/1": true, "/sys/fs": true, "/dev": true, "/dev/shm": true,
		"/procurement": false, "/devices": false, t.TempDir(): false,
	} {
		if got := kernelFS(path); got != want {
			t.Errorf("kernelFS(%s) = %v, want %v", path, got, want)
		}
	}
}
