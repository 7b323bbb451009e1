package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// restartAfterReboot starts again, before the remaining steps, every member of the plan that
// no longer runs although its data dir is there (the machine rebooted, or lost power, in the
// middle of the upgrade; nothing else restarts a local process). Each starts on the version it
// was on: that of the last hop the journal shows started for it (a hop interrupted after its
// restart may have run the new binary on the data already), else the plan's starting version.
// Without that version's binary in the plan it refuses and says what to do.
func (a *Applier) restartAfterReboot(ctx context.Context, j *plan.Journal) error {
	started := 0
	for _, m := range a.Plan.Members {
		if _, _, running := local.FindProcess(m.DataDir); running {
			continue
		}
		if _, err := os.Stat(filepath.Join(m.DataDir, "member", "snap", "db")); err != nil {
			continue // nothing to start from: the step that needs it will say so
		}
		version := a.Plan.From
		for h, hop := range a.Plan.Hops {
			if _, started := j.StartedAt(hopStepID(h, m.Name)); started {
				version = hop.Version
			}
		}
		bin, ok := a.Plan.Binaries[version]
		if !ok {
			return fmt.Errorf("%s does not run (the machine rebooted?) and the plan has no etcd binary for %s, the version it was on: start it on %s yourself, or make the plan again with --etcd-binary %s=PATH", m.Name, version, version, version)
		}
		a.report(Event{Kind: MemberStartedAgain, Member: m.Name, Message: fmt.Sprintf("%s does not run (the machine rebooted?): starting it again on %s", m.Name, version)})
		if err := (local.Runtime{Command: []string{bin}, Env: a.Plan.PassEnv}).Start(ctx, a.spec(m)); err != nil {
			return err
		}
		started++
	}
	if started == 0 {
		return nil
	}
	return a.waitAllUp(ctx)
}

// waitAllUp waits until every member of the plan answers and the cluster has one leader: the
// members just started again replay their logs and elect one before the steps go on.
func (a *Applier) waitAllUp(ctx context.Context) error {
	opts := finding.AwaitOptions{Probe: cluster.ProbeOptions{Discover: true}, Timeout: a.Timeout, Interval: 300 * time.Millisecond}
	j, err := finding.Await(ctx, a.conn(), opts, func(j finding.Judged) bool {
		return wholeCluster(j.View, a.Plan.Members) == nil && len(j.View.Leaders) == 1
	})
	if errors.Is(err, finding.ErrNotSettled) {
		why := wholeCluster(j.View, a.Plan.Members)
		if why == nil {
			why = fmt.Errorf("%d leaders named, not one", len(j.View.Leaders))
		}
		return fmt.Errorf("the members started again after a reboot are not all up with a leader after %s: %w", a.Timeout, why)
	}
	return err
}
