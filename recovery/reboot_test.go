package recovery

import (
	"os"
	"path/filepath"
	"testing"
)

// Review finding 3: after a reboot, a survivor (or a rejoined member) whose WAL lives apart
// (--wal-dir) was never started again: the check looked for member/wal, which etcd does not
// write then, and every rerun failed on a cluster that did not answer. Its WAL is looked for
// where it really is.
func TestHasWALLooksWhereTheWALLives(t *testing.T) {
	layout := func(t *testing.T, files ...string) string {
		t.Helper()
		root := t.TempDir()
		for _, f := range files {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	for _, tc := range []struct {
		name  string
		files []string
		apart bool // the member runs with --wal-dir=<root>/wal
		want  bool
	}{
		{"WAL in the data dir", []string{"data/member/wal/0000000000000000-0000000000000000.wal", "data/member/snap/db"}, false, true},
		{"WAL apart, as etcd lays it out with --wal-dir", []string{"wal/0000000000000000-0000000000000000.wal", "data/member/snap/db"}, true, true},
		{"WAL apart, its dir empty (wiped)", []string{"wal/.keep", "data/member/snap/db"}, true, false},
		{"WAL apart, its dir gone", []string{"data/member/snap/db"}, true, false},
		{"no WAL at all", []string{"data/member/snap/db"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := layout(t, tc.files...)
			m := PlanMember{Name: "m1", DataDir: filepath.Join(root, "data")}
			if tc.apart {
				m.WALDir = filepath.Join(root, "wal")
			}
			if got := hasWAL(m); got != tc.want {
				t.Fatalf("hasWAL = %v, want %v", got, tc.want)
			}
		})
	}
}
