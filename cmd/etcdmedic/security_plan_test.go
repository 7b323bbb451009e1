package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

// nobodyUID is a second user: a plan it could write must never be run by root.
const nobodyUID = 65534

// A plan decides which binary runs as every member, with which flags, and which data dirs are
// moved aside: recover plan and apply refuse a plan folder or file someone else could have
// written, before touching anything, and the review shows each member's exact command line
// and environment.
func TestRecoverRefusesAPlanOthersCouldWrite(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir)
	}
	c.Member("m2").Kill()
	c.Member("m3").Kill()
	backups := filepath.Join(t.TempDir(), "backups")

	// plan into a folder anyone can write: refused before any member is probed or stopped
	// (m1, still running without quorum, would be stopped by a plan that went ahead).
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777)
	code, _, errOut := runCLI(t, recoverPlanArgs(t, c, shared, backups)...)
	if code != exitFailed || !strings.Contains(errOut, "writable by its group or by others") {
		t.Fatalf("plan into a folder writable by all: exit %d %s", code, errOut)
	}
	if ents, _ := os.ReadDir(shared); len(ents) != 0 || !c.Member("m1").IsRunning() {
		t.Fatalf("a refused plan must do nothing: %v written, m1 running %v", ents, c.Member("m1").IsRunning())
	}

	c.Member("m1").Kill()
	planDir := filepath.Join(t.TempDir(), "plan")
	if code, out, errOut := runCLI(t, recoverPlanArgs(t, c, planDir, backups)...); code != exitOK {
		t.Fatalf("plan: exit %d %s %s", code, out, errOut)
	}

	// The review (apply without --yes) shows the argv apply runs for each member.
	_, review, _ := runCLI(t, "recover", "apply", planDir)
	bin := etcdtest.EtcdmedicBinary(t)
	for _, m := range c.Members() {
		if !reviewHasLine(review, bin+" etcd", "--name "+m.Name, "--data-dir "+m.DataDir, "--listen-peer-urls "+m.PeerURL) {
			t.Errorf("the review shows no command line starting %s with %s's flags:\n%s", bin, m.Name, review)
		}
	}
	if !strings.Contains(review, "ENVIRONMENT") || !strings.Contains(review, "\n  PATH=") {
		t.Errorf("the review shows no member environment:\n%s", review)
	}

	exposures := []struct {
		name          string
		expose, undo  func() error
		wantInMessage string
	}{
		{"plan folder 0777", func() error { return os.Chmod(planDir, 0o777) }, func() error { return os.Chmod(planDir, 0o700) }, "writable by its group or by others"},
		{"plan.json 0666", func() error { return os.Chmod(filepath.Join(planDir, plan.File), 0o666) }, func() error { return os.Chmod(filepath.Join(planDir, plan.File), 0o600) }, "writable by its group or by others"},
		{"plan.json owned by another user", func() error { return os.Chown(filepath.Join(planDir, plan.File), nobodyUID, nobodyUID) }, func() error { return os.Chown(filepath.Join(planDir, plan.File), os.Geteuid(), os.Getegid()) }, "owned by uid 65534"},
		{"plan folder owned by another user", func() error { return os.Chown(planDir, nobodyUID, nobodyUID) }, func() error { return os.Chown(planDir, os.Geteuid(), os.Getegid()) }, "owned by uid 65534"},
	}
	for _, e := range exposures {
		if strings.Contains(e.name, "another user") && os.Geteuid() != 0 {
			t.Logf("%s: skipped (giving a file to another user needs root)", e.name)
			continue
		}
		if err := e.expose(); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCLI(t, "recover", "apply", planDir, "--yes")
		if code != exitFailed || !strings.Contains(errOut, e.wantInMessage) || !strings.Contains(errOut, "nothing was done") {
			t.Errorf("%s: apply: exit %d, want %d and %q\n%s%s", e.name, code, exitFailed, e.wantInMessage, out, errOut)
		}
		if code, _, errOut := runCLI(t, "recover", "apply", planDir); code != exitFailed || !strings.Contains(errOut, e.wantInMessage) {
			t.Errorf("%s: the review must refuse too: exit %d %s", e.name, code, errOut)
		}
		if err := e.undo(); err != nil {
			t.Fatal(err)
		}
		assertNothingApplied(t, c, planDir, backups)
	}
}

// reviewHasLine reports whether one line of the review holds every part.
func reviewHasLine(review string, parts ...string) bool {
	for _, line := range strings.Split(review, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// assertNothingApplied: no journal, no backup, every member still down with its data in place.
func assertNothingApplied(t *testing.T, c *etcdtest.Cluster, planDir, backups string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(planDir, plan.JournalFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused apply started a journal: %v", err)
	}
	if ents, _ := os.ReadDir(backups); len(ents) != 0 {
		t.Fatalf("a refused apply backed up %v", ents)
	}
	for _, m := range c.Members() {
		if _, _, running := local.FindProcess(m.DataDir); running {
			t.Fatalf("a refused apply started %s", m.Name)
		}
		if qs, _ := filepath.Glob(m.DataDir + ".etcdmedic-quarantine*"); len(qs) != 0 {
			t.Fatalf("a refused apply quarantined %v", qs)
		}
	}
	if _, err := os.Stat(c.Member("m1").DataDir); err != nil {
		t.Fatalf("m1's data dir: %v", err)
	}
}

// upgrade apply refuses the same way, and its review shows each hop's binary and flags.
func TestUpgradeRefusesAPlanOthersCouldWrite(t *testing.T) {
	planDir := filepath.Join(t.TempDir(), "plan")
	p := &upgrade.Plan{Version: 1, CreatedAt: time.Now().UTC(), From: "v3.5.19", Target: "v3.6.16",
		Members: []upgrade.Member{
			{Name: "m1", DataDir: "/var/lib/etcd-m1", PeerURLs: []string{"http://127.0.0.1:1"}, ClientURLs: []string{"http://127.0.0.1:2"}},
			{Name: "m2", DataDir: "/var/lib/etcd-m2", PeerURLs: []string{"http://127.0.0.1:3"}, ClientURLs: []string{"http://127.0.0.1:4"}},
		},
		Hops:      []upgrade.Hop{{Version: "v3.5.24", Why: "fix"}, {Version: "v3.6.16", Why: "the target"}},
		Binaries:  map[string]string{"v3.5.24": "/opt/etcd-3.5.24/etcd", "v3.6.16": "/opt/etcd 3.6.16/etcd"},
		BackupDir: filepath.Join(t.TempDir(), "backups"), EtcdFlags: []string{"--quota-backend-bytes=8589934592"},
		PassEnv: []string{"ETCD_LOG_LEVEL=debug"},
		Check:   &upgrade.Report{Verdict: "SAFE"}, Steps: []plan.Step{{ID: "snapshot", Title: "snapshot"}}}
	if err := p.Save(planDir); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ETCDCTL_PASSWORD", "s3cret") // never a member's, so never in the review
	_, review, _ := runCLI(t, "upgrade", "apply", planDir)
	for _, want := range [][]string{
		{"hop 1", "m1", "/opt/etcd-3.5.24/etcd --name m1 --data-dir /var/lib/etcd-m1", "--initial-cluster m1=http://127.0.0.1:1,m2=http://127.0.0.1:3", "--quota-backend-bytes=8589934592"},
		{"hop 2", "m2", "'/opt/etcd 3.6.16/etcd' --name m2 --data-dir /var/lib/etcd-m2", "--initial-cluster-state existing", "--quota-backend-bytes=8589934592"},
	} {
		if !reviewHasLine(review, want...) {
			t.Errorf("the review has no line with %q:\n%s", want, review)
		}
	}
	if !strings.Contains(review, "ENVIRONMENT") || !strings.Contains(review, "\n  ETCD_LOG_LEVEL=debug\n") || strings.Contains(review, "s3cret") {
		t.Errorf("the review must show the members' whole environment, the passed ETCD_* included, nothing else:\n%s", review)
	}
	if err := os.Chmod(filepath.Join(planDir, plan.File), 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "upgrade", "apply", planDir, "--yes")
	if code != exitFailed || !strings.Contains(errOut, "writable by its group or by others") {
		t.Fatalf("apply of a plan writable by all: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(planDir, plan.JournalFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused apply started a journal: %v", err)
	}
	if os.Geteuid() == 0 {
		os.Chmod(filepath.Join(planDir, plan.File), 0o600)
		os.Chown(planDir, nobodyUID, nobodyUID)
		if code, _, errOut := runCLI(t, "upgrade", "apply", planDir, "--yes"); code != exitFailed || !strings.Contains(errOut, "owned by uid 65534") {
			t.Fatalf("apply of another user's plan: exit %d %s", code, errOut)
		}
	}
}
