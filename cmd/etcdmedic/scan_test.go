package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/scan"
)

// The follow-up of incident 1, in one command: of all the local volumes on a node, which hold
// etcd data, and does the live cluster still claim it?
func TestScanFindsLiveStaleForeignAndEmpty(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	other := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	root := filepath.Join(t.TempDir(), "mnt", "disks")

	// vol-live: a stopped member that is still in the cluster; vol-running: m1's own data dir,
	// in use; vol-stale: m3's data, m3 removed; vol-foreign: another cluster's member.
	m2 := c.Member("m2")
	m2.Stop()
	copyDir(t, m2.DataDir, filepath.Join(root, "vol-live"))
	if err := m2.Start(); err != nil {
		t.Fatal(err)
	}
	m3 := c.Member("m3")
	m3.Stop()
	copyDir(t, m3.DataDir, filepath.Join(root, "vol-stale", "pd"))
	writeFile(t, filepath.Join(root, "vol-stale", "pd", "join"), "m1="+c.Member("m1").PeerURL)
	c.RemoveMember(t, m3)
	om := other.Member("m1")
	om.Stop()
	copyDir(t, om.DataDir, filepath.Join(root, "vol-foreign"))
	if err := os.Symlink(c.Member("m1").DataDir, filepath.Join(root, "vol-running")); err != nil {
		t.Fatal(err)
	}
	// Two thousand empty volumes, a fresh one with lost+found, a symlink loop, a dangling link.
	for i := 0; i < 2000; i++ {
		os.MkdirAll(filepath.Join(root, "empty", fmt.Sprintf("vol-%04d", i)), 0o755)
	}
	os.MkdirAll(filepath.Join(root, "vol-fresh", "lost+found"), 0o700)
	os.Symlink(root, filepath.Join(root, "empty", "loop"))
	os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(root, "dangling"))
	if err := m2.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}

	started := time.Now()
	// vol-running leads outside root, to m1's own data dir: followed on purpose.
	code, out, errOut := runCLI(t, "scan", root, "-w", "json", "--follow-links-outside", "--endpoints", strings.Join(c.Endpoints(), ","), "--command-timeout", "3s")
	took := time.Since(started)
	var res scan.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("scan printed no JSON (exit %d): %v\n%s", code, err, errOut)
	}
	if code != exitCritical {
		t.Errorf("stale data found: want exit 2, got %d", code)
	}
	want := map[string]string{
		"vol-live":     string(guard.Valid),
		"vol-stale/pd": string(guard.Removed),
		"vol-foreign":  string(guard.Foreign),
		"vol-running":  "IN USE",
	}
	got := map[string]string{}
	for _, f := range res.Found {
		rel, _ := filepath.Rel(root, f.Path)
		switch {
		case f.InUse:
			got[rel] = "IN USE"
		case f.Verdict != nil:
			got[rel] = string(f.Verdict.Class)
		default:
			got[rel] = "?" + f.Error
		}
		if !f.InUse && (f.ClusterID == "" || f.MemberID == "" || f.LastIndex == 0 || f.Modified.IsZero()) {
			t.Errorf("%s: identity missing: %+v", rel, f)
		}
	}
	for rel, class := range want {
		if got[rel] != class {
			t.Errorf("%s: got %q, want %q (all: %v)", rel, got[rel], class, got)
		}
	}
	if len(res.Found) != len(want) || res.Dirs < 2000 {
		t.Errorf("found %d data dirs in %d dirs: %v", len(res.Found), res.Dirs, got)
	}
	if !strings.Contains(strings.Join(res.Skipped, "\n"), "dangling") {
		t.Errorf("the dangling link should be listed as skipped: %v", res.Skipped)
	}
	t.Logf("scanned %d directories in %s", res.Dirs, took)
}

// scan given a relative PATH still names the member that runs on a data dir, and reads it with
// that member's --wal-dir: IN USE, not INCOMPLETE. The relative paths never matched the running
// process's absolute --data-dir (review item 13, third bullet).
func TestScanWithARelativePathNamesTheRunningMember(t *testing.T) {
	t.Parallel()
	s := walDirFlagShape(t, etcdtest.EtcdmedicBinary(t))
	pid, _ := startShape(t, s)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(cwd, filepath.Dir(s.dataDir))
	if err != nil || filepath.IsAbs(rel) {
		t.Fatalf("no relative path from %s to %s: %q %v", cwd, s.dataDir, rel, err)
	}
	code, res, errOut := scanJSON(t, rel)
	if code != exitOK || len(res.Found) != 1 {
		t.Fatalf("scan %s: exit %d, found %v: %s", rel, code, foundPaths(res), errOut)
	}
	f := res.Found[0]
	if f.Path != s.dataDir || f.UsedBy == nil || f.UsedBy.PID != pid || f.WALDir != s.walDir || !f.InUse {
		t.Errorf("scan %s: want %s used by pid %d, WAL dir %s, in use; got %+v", rel, s.dataDir, pid, s.walDir, f)
	}
}

// With --endpoints, a data dir that could not be judged is not "no stale data dir": a scan that
// cannot reach the cluster (every verdict UNKNOWN), or finds half a member (INCOMPLETE), exits 3
// naming how many and why, and -w json still prints the whole result. It exited 0 (review
// item 4).
func TestScanExitsNonZeroWhenItCouldNotJudge(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	m1 := c.Member("m1")
	if err := m1.Stop(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	copyDir(t, m1.DataDir, filepath.Join(root, "whole", "vol"))
	copyDir(t, m1.DataDir, filepath.Join(root, "half", "vol"))
	if err := os.RemoveAll(filepath.Join(root, "half", "vol", "member", "wal")); err != nil {
		t.Fatal(err)
	}
	if err := m1.Start(); err != nil {
		t.Fatal(err)
	}
	if err := m1.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, endpoints string
		class                guard.Class
		why                  string
	}{
		{"the cluster not reached", "whole", "http://127.0.0.1:1", guard.Unknown, "could not judge 1 data dir(s) against the live cluster (listed above): 1 UNKNOWN (no member of the live cluster answered)"},
		{"half a member", "half", strings.Join(c.Endpoints(), ","), guard.Incomplete, "could not judge 1 data dir(s) against the live cluster (listed above): 1 INCOMPLETE ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, res, errOut := scanJSON(t, filepath.Join(root, tc.dir), "--endpoints", tc.endpoints, "--command-timeout", "3s")
			if code != exitFailed || !strings.Contains(errOut, tc.why) || !strings.Contains(errOut, "Hint: ") {
				t.Errorf("exit %d, want %d and an error containing %q: %s", code, exitFailed, tc.why, errOut)
			}
			if len(res.Found) != 1 || res.Found[0].Verdict == nil || res.Found[0].Verdict.Class != tc.class || res.Found[0].ClusterID == "" && tc.class == guard.Unknown {
				t.Errorf("want the whole result with one %s data dir: %+v", tc.class, res.Found)
			}
		})
	}
}
