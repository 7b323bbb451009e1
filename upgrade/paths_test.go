package upgrade

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/plan"
)

// Review finding 1: upgrade plan recorded data dirs, WAL dirs and etcd binaries as typed, and
// apply (from a systemd unit, cron, another shell) resolved them against its own working
// directory: the real member was not stopped, a second etcd started on an empty data dir. The
// plan records them absolute, against the directory it was made in; a bare binary name is
// looked up in $PATH then.
func TestPlanRecordsAbsolutePathsWhateverApplysWorkingDirectory(t *testing.T) {
	made, elsewhere := t.TempDir(), t.TempDir()
	binDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(binDir, "etcd-on-path"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", binDir)
	t.Chdir(made)
	members := []Member{{Name: "m1", DataDir: "m1.etcd", WALDir: "wal/m1"}, {Name: "m2", DataDir: "./m2.etcd"}}
	bins := map[string]string{"v3.5.24": "./bin/etcd-3.5.24", "v3.6.16": "etcd-on-path"}
	p, err := NewPlan(&Report{Verdict: "SAFE"}, mustVersion(t, "3.5.24"), mustVersion(t, "3.6.16"), members, bins, "backups", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	planDir := filepath.Join(t.TempDir(), "plan")
	if err := p.Save(planDir); err != nil {
		t.Fatal(err)
	}
	t.Chdir(elsewhere)
	loaded, err := LoadPlan(planDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"m1's data dir": filepath.Join(made, "m1.etcd"), "m1's WAL dir": filepath.Join(made, "wal/m1"),
		"m2's data dir": filepath.Join(made, "m2.etcd"), "m2's WAL dir": "",
		"v3.5.24": filepath.Join(made, "bin/etcd-3.5.24"), "v3.6.16": filepath.Join(binDir, "etcd-on-path"),
	}
	got := map[string]string{
		"m1's data dir": loaded.member("m1").DataDir, "m1's WAL dir": loaded.member("m1").WALDir,
		"m2's data dir": loaded.member("m2").DataDir, "m2's WAL dir": loaded.member("m2").WALDir,
		"v3.5.24": loaded.Binaries["v3.5.24"], "v3.6.16": loaded.Binaries["v3.6.16"],
	}
	for what, w := range want {
		if got[what] != w {
			t.Errorf("%s: %q, want %q", what, got[what], w)
		}
	}
	if members[0].DataDir != "m1.etcd" || bins["v3.5.24"] != "./bin/etcd-3.5.24" {
		t.Errorf("NewPlan changed its caller's members or binaries: %+v %v", members, bins)
	}

	// A bare name not on $PATH is refused when the plan is made, not when apply needs it.
	bins["v3.6.16"] = "no-such-etcd"
	if _, err := NewPlan(&Report{Verdict: "SAFE"}, mustVersion(t, "3.5.24"), mustVersion(t, "3.6.16"), members, bins, "backups", nil, time.Now()); err == nil || !strings.Contains(err.Error(), "no-such-etcd") {
		t.Errorf("a binary not on $PATH: %v", err)
	}
}

// A plan made before that fix, with relative paths in it, is refused by apply with the paths
// named, never resolved against apply's working directory.
func TestLoadPlanRefusesAPlanWithRelativePaths(t *testing.T) {
	for name, edit := range map[string]func(p *Plan){
		"data dir": func(p *Plan) { p.Members[0].DataDir = "m1.etcd" },
		"WAL dir":  func(p *Plan) { p.Members[0].WALDir = "wal" },
		"binary":   func(p *Plan) { p.Binaries["v3.6.16"] = "./bin/etcd" },
	} {
		t.Run(name, func(t *testing.T) {
			p := &Plan{Version: 1, CreatedAt: time.Now().UTC(), From: "v3.5.24", Target: "v3.6.16",
				Members: []Member{{Name: "m1", DataDir: "/var/lib/etcd-m1"}}, Hops: hops("v3.6.16"),
				Binaries: map[string]string{"v3.6.16": "/opt/etcd-3.6.16/etcd"}, BackupDir: "/var/backups/etcd",
				Check: &Report{Verdict: "SAFE"}, Steps: []plan.Step{plan.NewStep(StepSnapshot, "", "snapshot")}}
			edit(p)
			planDir := filepath.Join(t.TempDir(), "plan")
			if err := p.Save(planDir); err != nil {
				t.Fatal(err)
			}
			_, err := LoadPlan(planDir)
			if !errors.Is(err, ErrRelativePath) || !strings.Contains(err.Error(), "upgrade plan") {
				t.Fatalf("LoadPlan of a plan with a relative %s: %v", name, err)
			}
		})
	}
}
