package recovery

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runtime/runbook"
)

// assessed is three members of one cluster, m1 the survivor.
func assessed(t *testing.T) *Assessment {
	a := &Assessment{ClusterID: 0xc1, Survivor: "m1"}
	for i, name := range []string{"m1", "m2", "m3"} {
		a.Candidates = append(a.Candidates, Candidate{Name: name, DataDir: filepath.Join(t.TempDir(), name), ClusterID: 0xc1, Commit: uint64(100 - i),
			PeerURLs: []string{"http://127.0.0.1:238" + string(rune('0'+i))}, ClientURLs: []string{"http://127.0.0.1:237" + string(rune('0'+i))}})
	}
	return a
}

func TestPlanStepsFollowTheRunbook(t *testing.T) {
	p, err := NewPlan(assessed(t), PlanOptions{BackupDir: t.TempDir(), KubeadmJoin: map[string]bool{"m3": true}, Runbook: map[string]runbook.Style{"m2": runbook.Process}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	want := "stop-all backup force-new-cluster remove-leftovers restart-clean rejoin:m2 rejoin:m3 verify"
	if strings.Join(ids, " ") != want {
		t.Errorf("steps %v, want %s", ids, want)
	}
	if m := p.Member("m3"); !m.KubeadmJoin || m.Runbook != runbook.Kubeadm {
		t.Errorf("m3 %+v: a kubeadm-join member is a kubeadm runbook member", m)
	}
	if !strings.Contains(p.Steps[6].Title, "kubeadm join --control-plane") {
		t.Errorf("m3's rejoin: %q", p.Steps[6].Title)
	}
}

// The survivor's first run alone elects itself at once, and restart-clean gives it back its
// own settings before anyone rejoins; where those settings cannot be overridden, it starts
// once, with them.
func TestTheSurvivorsFirstRunIsShortOnlyWhereItsSettingsCanBeRestored(t *testing.T) {
	for name, tt := range map[string]struct {
		o         PlanOptions
		first     []string
		restarted bool
	}{
		"a local process":                       {PlanOptions{}, shortRunFlags, true},
		"its election timeout passed in ETCD_*": {PlanOptions{PassEnv: []string{"ETCD_ELECTION_TIMEOUT=5000"}}, nil, false},
		"its heartbeat passed in ETCD_*":        {PlanOptions{PassEnv: []string{"ETCD_HEARTBEAT_INTERVAL=250"}}, nil, false},
		"its snapshot count passed":             {PlanOptions{PassEnv: []string{"ETCD_SNAPSHOT_COUNT=10000"}}, shortRunFlags, true},
		"another variable passed":               {PlanOptions{PassEnv: []string{"ETCD_QUOTA_BACKEND_BYTES=8589934592"}}, shortRunFlags, true},
		"on another node, forced by a runbook":  {PlanOptions{Runbook: map[string]runbook.Style{"m1": runbook.Process}}, nil, true},
	} {
		tt.o.BackupDir = t.TempDir()
		p, err := NewPlan(assessed(t), tt.o, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := p.firstRunFlags(); p.Member("m1").Runbook == "" && !slices.Equal(got, tt.first) {
			t.Errorf("%s: first run with %v, want %v", name, got, tt.first)
		}
		if got := slices.ContainsFunc(p.Steps, func(s plan.Step) bool { return s.Kind == StepRestartClean }); got != tt.restarted {
			t.Errorf("%s: restart-clean in the plan %v, want %v", name, got, tt.restarted)
		}
	}
}

func TestPlanRefusesOptionsThatCannotHold(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "etcd.yaml")
	os.WriteFile(manifest, []byte("not: [yaml"), 0o600)
	for name, tt := range map[string]struct {
		o    PlanOptions
		want string
	}{
		"no backup folder":          {PlanOptions{}, "--backup-dir is required"},
		"unknown member":            {PlanOptions{BackupDir: "b", Runbook: map[string]runbook.Style{"m9": runbook.Process}}, "no member called m9"},
		"survivor joined again":     {PlanOptions{BackupDir: "b", KubeadmJoin: map[string]bool{"m1": true}}, "is the survivor"},
		"manifest and runbook":      {PlanOptions{BackupDir: "b", Manifests: map[string]string{"m2": manifest}, Runbook: map[string]runbook.Style{"m2": runbook.Kubeadm}}, "exclude each other"},
		"manifest that is not YAML": {PlanOptions{BackupDir: "b", Manifests: map[string]string{"m2": manifest}}, "not YAML"},
		"compacted without a bump":  {PlanOptions{BackupDir: "b", Snapshot: &SnapshotOptions{Path: manifest, MarkCompacted: true}}, "--mark-compacted needs --bump-revision"},
		"snapshot that is not a db": {PlanOptions{BackupDir: "b", Snapshot: &SnapshotOptions{Path: manifest}}, "not a snapshot"},
	} {
		if _, err := NewPlan(assessed(t), tt.o, time.Now()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", name, err, tt.want)
		}
	}
	a := assessed(t)
	a.Candidates[2].ClusterID = 0xc2
	if _, err := NewPlan(a, PlanOptions{BackupDir: "b"}, time.Now()); err == nil || !strings.Contains(err.Error(), "another cluster") {
		t.Errorf("a data dir of another cluster: %v", err)
	}
}

// Membership is never changed silently, and data that could not be read is never moved
// without the operator's word: one row per situation.
func TestPlanKeepsTheMembershipAndUnreadableData(t *testing.T) {
	for name, tt := range map[string]struct {
		edit     func(a *Assessment)
		o        PlanOptions
		want     string // an error, or "" for a plan
		members  int
		leftOut  string
		discards string
	}{
		"every member in the membership": {func(a *Assessment) {}, PlanOptions{}, "", 3, "", ""},
		"m3 removed before the loss": {func(a *Assessment) { a.Candidates[2].Standing = "removed at index 42" },
			PlanOptions{}, "", 2, "m3", ""},
		"m3 removed, added back on purpose": {func(a *Assessment) { a.Candidates[2].Standing = "removed at index 42" },
			PlanOptions{ReAdd: map[string]bool{"m3": true}}, "", 3, "", ""},
		"m3 unknown to the survivor": {func(a *Assessment) { a.Candidates[2].Standing = StandingUnknown },
			PlanOptions{}, "", 2, "m3", ""},
		"m2's db unreadable": {func(a *Assessment) {
			a.Candidates[1].Unreadable, a.Candidates[1].Rejected = true, "its db cannot be read"
		},
			PlanOptions{}, "--discard-unreadable m2", 0, "", ""},
		"m2's db unreadable, discarded on purpose": {func(a *Assessment) {
			a.Candidates[1].Unreadable, a.Candidates[1].Rejected = true, "its db cannot be read"
		},
			PlanOptions{DiscardUnreadable: map[string]bool{"m2": true}}, "", 3, "", "m2"},
		"m3 wiped": {func(a *Assessment) { a.Candidates[2].Wiped, a.Candidates[2].Rejected = true, "wiped" },
			PlanOptions{}, "", 3, "", ""},
		"a voter left off the command line": {func(a *Assessment) {
			a.Candidates[0].Membership = []etcdmedic.Member{{ID: 1, Name: "m1"}, {ID: 2, Name: "m2"}, {ID: 3, Name: "m3"}, {ID: 4, Name: "m4"}}
		}, PlanOptions{}, "m4 is a voter in m1's membership", 0, "", ""},
		"a learner left off the command line": {func(a *Assessment) {
			a.Candidates[0].Membership = []etcdmedic.Member{{ID: 1, Name: "m1"}, {ID: 4, Name: "m4", IsLearner: true}}
		}, PlanOptions{}, "", 3, "", ""},
	} {
		a := assessed(t)
		for i := range a.Candidates {
			a.Candidates[i].Standing = StandingVoter
		}
		tt.edit(a)
		tt.o.BackupDir = t.TempDir()
		p, err := NewPlan(a, tt.o, time.Now())
		if tt.want != "" {
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: %v, want %q", name, err, tt.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(p.Members) != tt.members {
			t.Errorf("%s: %d members in the plan, want %d", name, len(p.Members), tt.members)
		}
		if tt.leftOut != "" && (len(p.LeftOut) != 1 || p.LeftOut[0].Name != tt.leftOut) {
			t.Errorf("%s: left out %+v, want %s", name, p.LeftOut, tt.leftOut)
		}
		if tt.discards != "" && !p.Member(tt.discards).DiscardUnreadable {
			t.Errorf("%s: %s not marked for discarding", name, tt.discards)
		}
	}
}

// An old backup folder must never pass for this recovery's backups.
func TestPlanRefusesABackupFolderInUse(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "m1", "data"), 0o700)
	if _, err := NewPlan(assessed(t), PlanOptions{BackupDir: dir}, time.Now()); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("a backup folder holding m1's old backup: %v", err)
	}
}

// A survivor whose WAL tail must be cut: the step says so on a local data dir; a survivor on
// another node (a printed runbook) is refused, since the cut is made on the data dir itself.
func TestPlanCutsTheSurvivorsInvalidTailOnlyWhereItCan(t *testing.T) {
	a := assessed(t)
	a.Candidates[0].TailCut = "its WAL is cut before entry 9 (term going down)"
	p, err := NewPlan(a, PlanOptions{BackupDir: t.TempDir()}, time.Now())
	if err != nil || !strings.Contains(p.Steps[2].Title, "cut before entry 9") {
		t.Fatalf("local survivor: %v, step %q", err, p.Steps[2].Title)
	}
	a = assessed(t)
	a.Candidates[0].TailCut = "its WAL is cut before entry 9 (term going down)"
	if _, err := NewPlan(a, PlanOptions{BackupDir: t.TempDir(), Runbook: map[string]runbook.Style{"m1": runbook.Process}}, time.Now()); err == nil || !strings.Contains(err.Error(), "m1's node") {
		t.Fatalf("runbook survivor: %v, want a refusal", err)
	}
}
