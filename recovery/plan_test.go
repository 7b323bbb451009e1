package recovery

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/runtime/runbook"
)

// assessed is three members of one cluster, m1 the survivor.
func assessed(t *testing.T) *Assessment {
	a := &Assessment{ClusterID: "c1", Survivor: "m1"}
	for i, name := range []string{"m1", "m2", "m3"} {
		a.Candidates = append(a.Candidates, Candidate{Name: name, DataDir: filepath.Join(t.TempDir(), name), ClusterID: "c1", Commit: uint64(100 - i),
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
	a.Candidates[2].ClusterID = "c2"
	if _, err := NewPlan(a, PlanOptions{BackupDir: "b"}, time.Now()); err == nil || !strings.Contains(err.Error(), "another cluster") {
		t.Errorf("a data dir of another cluster: %v", err)
	}
}
