package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runlock"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

// refusedWhileLocked checks a run refused by another run's lock: exit 3, one Error line naming
// the holder (this test process), no hint.
func refusedWhileLocked(t *testing.T, code int, errOut, target string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != exitFailed || len(lines) != 1 || !strings.HasPrefix(lines[0], "Error: "+target+" is in use by another etcdmedic run (pid "+strconv.Itoa(os.Getpid())+": ") {
		t.Fatalf("want exit 3 and one Error line naming pid %d, got exit %d:\n%s", os.Getpid(), code, errOut)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Two `guard --fix` at once on one stale data dir: the second refuses, names the first, and
// touches nothing; once the first is done, it quarantines.
func TestGuardFixLockedByAnotherRun(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	other := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1}) // its data dir is FOREIGN to c
	if err := other.Member("m1").Stop(); err != nil {
		t.Fatal(err)
	}
	stale := other.Member("m1").DataDir
	_, peer := newURLs(t)
	// m4 is added first: only then is c proven to be its cluster, and the other's data moved.
	addLearner(t, c.Client(t), peer)
	args := []string{"--data-dir", stale, "--name", "m4", "--peer-urls", peer, "--endpoints", strings.Join(c.Endpoints(), ","), "--fix"}
	before := dirNames(t, stale)

	first, err := runlock.Acquire(stale, "guard --fix") // the other run
	if err != nil {
		t.Fatal(err)
	}
	code, g, errOut := runGuard(t, args...)
	first.Release()
	refusedWhileLocked(t, code, errOut, stale)
	if g.Quarantined != nil {
		t.Fatalf("refused, yet quarantined: %+v", g.Quarantined)
	}
	if after := dirNames(t, stale); !slices.Equal(before, after) {
		t.Fatalf("the data dir changed: %v, now %v", before, after)
	}
	for _, q := range []string{stale + datadir.QuarantineFolder, filepath.Join(stale, datadir.QuarantineFolder)} {
		if _, err := os.Stat(q); err == nil {
			t.Fatalf("a quarantine folder was created: %s", q)
		}
	}

	code, g, errOut = runGuard(t, args...)
	if code != exitOK || g.Quarantined == nil {
		t.Fatalf("after the other run released: exit %d, %+v\n%s", code, g, errOut)
	}
}

// upgrade apply refuses, before opening the journal, while its plan dir or a member's data dir
// is held by another run.
func TestUpgradeApplyRefusesWhileLocked(t *testing.T) {
	t.Parallel()
	planDir := filepath.Join(t.TempDir(), "upgrade")
	m1 := filepath.Join(t.TempDir(), "m1")
	if err := os.Mkdir(m1, 0o700); err != nil {
		t.Fatal(err)
	}
	p := &upgrade.Plan{Version: 1, From: "v3.5.19", Target: "v3.6.16",
		Members: []upgrade.Member{{Name: "m1", DataDir: m1, ClientURLs: []string{"http://127.0.0.1:1"}, PeerURLs: []string{"http://127.0.0.1:2"}}},
		Steps:   []plan.Step{{ID: "backup", Title: "snapshot the cluster"}}}
	if err := p.Save(planDir); err != nil {
		t.Fatal(err)
	}
	for _, held := range []string{planDir, m1} {
		other, err := runlock.Acquire(held, "upgrade apply")
		if err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI(t, "upgrade", "apply", planDir, "--yes", "--command-timeout", "1s")
		other.Release()
		refusedWhileLocked(t, code, errOut, held)
		if names := dirNames(t, planDir); !slices.Equal(names, []string{plan.File}) {
			t.Fatalf("plan dir changed while %s was held: %v", held, names)
		}
	}
}
