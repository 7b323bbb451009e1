package recovery

import (
	"context"
	"os"
	"path/filepath"

	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// restartAfterReboot starts again the local members an interrupted run had already brought
// back (the rebuilt survivor, the members whose rejoin is done) and that no longer run: after
// a reboot nothing restarts them, and the remaining steps need them. Static pods come back
// with kubelet; runbook members are the operator's.
func (a *Applier) restartAfterReboot(ctx context.Context, j *plan.Journal) error {
	_, forced := j.Done(string(StepForceNewCluster))
	_, restored := j.Done(string(StepRestoreSnapshot))
	for _, m := range a.Plan.Members {
		if m.Manifest != "" || m.Runbook != "" {
			continue
		}
		_, rejoined := j.Done(plan.StepID(StepRejoin, m.Name))
		if !(rejoined || (m.Name == a.Plan.Survivor && (forced || restored))) {
			continue
		}
		if _, _, running := local.FindProcess(m.DataDir); running {
			continue
		}
		if !hasWAL(m) {
			continue // nothing to start from: the step that needs it will say so
		}
		a.say("%s does not run (the machine rebooted?): starting it again on %s", m.Name, m.DataDir)
		spec := a.spec(m) // etcd reads the membership from the data dir; the bootstrap flags are ignored
		spec.ClusterState = "existing"
		if err := a.Runtime.Start(ctx, spec); err != nil {
			return err
		}
	}
	return nil
}

// hasWAL reports whether m's WAL is there to start from: WAL segments in its --wal-dir when
// it lives apart (etcd then writes no member/wal in the data dir), else member/wal.
func hasWAL(m PlanMember) bool {
	if m.WALDir == "" {
		_, err := os.Stat(filepath.Join(m.DataDir, "member", "wal"))
		return err == nil
	}
	segments, err := filepath.Glob(filepath.Join(m.WALDir, "*.wal"))
	return err == nil && len(segments) > 0
}
