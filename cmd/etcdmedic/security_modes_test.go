package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic/recovery"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// privateTree checks that every folder under root (root included) is 0700 and every file 0600,
// down to depth levels below root (-1: all): what etcdmedic keeps of a cluster holds its Secrets.
func privateTree(t *testing.T, root string, depth int) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(root, p); depth >= 0 && rel != "." && strings.Count(rel, "/") >= depth {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s is %04o, want %04o", p, got, want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func wantMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Errorf("%s is %04o, want %04o", path, got, want)
	}
}

// Under an operator's usual umask (022), a quorum-loss recovery leaves its plan, its backups,
// its quarantines and its members' .log and .pid readable by their owner only: each holds the
// cluster's data or etcd's whole command line.
func TestRecoveryFilesArePrivateUnderUmask022(t *testing.T) {
	t.Parallel()
	c, _ := quorumLost(t)
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	// A member log an older etcdmedic left readable by all is made private when appended to.
	for _, m := range c.Members() {
		if err := os.WriteFile(local.LogFile(m.DataDir), []byte("older log\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(local.LogFile(m.DataDir), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	cli := processCLI{umask: "022"}
	code, out, errOut := cli.run(t, recoverPlanArgs(t, c, planDir, backups)...)
	if code == exitOK {
		code, out, errOut = cli.run(t, "recover", "apply", planDir, "--yes")
	}
	if code != exitOK {
		t.Fatalf("recover: exit %d\n%s\n%s", code, out, errOut)
	}

	if n := privateTree(t, planDir, -1); n < 3 {
		t.Errorf("the plan dir holds %d entries, want the folder, plan.json and journal.jsonl", n)
	}
	wantMode(t, filepath.Join(planDir, "journal.jsonl"), 0o600)
	if n := privateTree(t, backups, -1); n < 8 {
		t.Errorf("the backups hold only %d entries", n)
	}
	p, err := recovery.LoadPlan(planDir)
	if err != nil {
		t.Fatal(err)
	}
	quarantines, started := 0, 0
	for _, m := range p.Members {
		// The quarantine folders, manifest, report and data/: the files moved into data/ are
		// etcd's own, with the modes etcd gave them, behind those 0700 folders.
		qs, _ := filepath.Glob(m.DataDir + ".etcdmedic-quarantine")
		for _, q := range qs {
			privateTree(t, q, 2)
			quarantines++
		}
		if _, err := os.Stat(local.PIDFile(m.DataDir)); err == nil {
			wantMode(t, local.PIDFile(m.DataDir), 0o600)
			wantMode(t, local.LogFile(m.DataDir), 0o600)
			started++
		}
	}
	if quarantines == 0 || started != len(p.Members) {
		t.Errorf("%d quarantines and %d members started by the recovery: nothing to check", quarantines, started)
	}
}
